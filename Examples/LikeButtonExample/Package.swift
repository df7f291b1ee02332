// swift-tools-version:6.0
import PackageDescription

/// The seed's heart button on top of CounterClient, for Apple platforms (SwiftUI). On Linux every
/// file compiles to nothing (`#if canImport(SwiftUI)`), so this package never breaks a Linux build;
/// it is not part of the main package, so `swift build` at the root does not even look at it.
let package = Package(
    name: "LikeButtonExample",
    platforms: [.iOS(.v17), .macOS(.v15)],
    products: [
        .library(name: "LikeButtonUI", targets: ["LikeButtonUI"])
    ],
    dependencies: [
        .package(name: "CounterService", path: "../..")
    ],
    targets: [
        // The button, the reaction picker and a small feed screen; add this to an app.
        .target(name: "LikeButtonUI", dependencies: [.product(name: "CounterClient", package: "CounterService")]),
        // A runnable demo (`swift run` on a Mac, or as the code of an iOS app target).
        .executableTarget(
            name: "LikeButtonExampleApp",
            dependencies: [
                "LikeButtonUI", .product(name: "CounterClient", package: "CounterService"),
            ]),
    ],
    swiftLanguageModes: [.v6]
)
