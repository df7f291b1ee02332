-- wrk script: POST …/toggle on one hot post with a different user for every request, so every
-- request is a change.
--   wrk -t1 -c64 -d10s -s scripts/wrk/toggle.lua http://127.0.0.1:8080 -- <post id>
counter = 0
post = 1
base = 0

math.randomseed(os.time())

function setup(thread)
  -- Each wrk thread (and each run) gets its own range of users.
  thread:set("base", math.random(1, 1000000) * 1000000)
end

function init(args)
  if args[1] then post = tonumber(args[1]) end
end

function request()
  counter = counter + 1
  return wrk.format("POST", "/v1/posts/" .. post .. "/likes/" .. (base + counter) .. "/toggle")
end
