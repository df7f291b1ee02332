import CounterClient
import Foundation

// The client library as an app would run it, in a process of its own: a test starts it where
// the system's certificate bundle trusts the test's certificate (a private mount namespace), as
// FoundationNetworking on Linux trusts only that bundle.
//
//   ClientProbe BASE-URL API-TOKEN POST USERS
//
// Likes POST as users 1…USERS at once, then reads each like back; prints "liked N" and
// "count C" and exits 0, or prints the error and exits 1.

let arguments = CommandLine.arguments
guard arguments.count == 5, let url = URL(string: arguments[1]), let post = Int64(arguments[3]), let users = Int64(arguments[4]) else {
    print("usage: ClientProbe BASE-URL API-TOKEN POST USERS")
    exit(2)
}
let client = CounterServiceClient(configuration: .init(baseURL: url, apiToken: arguments[2]))
do {
    let liked = try await withThrowingTaskGroup(of: Bool.self) { group in
        for user in 1...users {
            group.addTask { try await client.like(post: post, user: user).isLiked }
        }
        var liked = 0
        for try await isLiked in group where isLiked { liked += 1 }
        return liked
    }
    var count: Int64 = 0
    for user in 1...users {
        let status = try await client.status(post: post, user: user)
        guard status.isLiked else {
            print("user \(user): not liked when read back")
            exit(1)
        }
        count = status.likesCount
    }
    print("liked \(liked)")
    print("count \(count)")
} catch {
    print("error: \(error)")
    exit(1)
}
