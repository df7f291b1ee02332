import RedisDriver

extension RedisCommand {
    /// The name and arguments, decoded from the RESP encoding (`*<n>\r\n` then
    /// `$<length>\r\n<bytes>\r\n` per part), for tests that look at what would be sent.
    public var decodedArguments: [String] {
        let bytes = encoded
        var position = 0
        func line() -> Int {
            var end = position
            while bytes[end] != 13 { end += 1 }
            let value = Int(String(decoding: bytes[(position + 1)..<end], as: UTF8.self))!
            position = end + 2
            return value
        }
        let count = line()
        var arguments: [String] = []
        arguments.reserveCapacity(count)
        for _ in 0..<count {
            let length = line()
            arguments.append(String(decoding: bytes[position..<(position + length)], as: UTF8.self))
            position += length + 2
        }
        return arguments
    }
}
