#if canImport(SwiftUI)
    import CounterClient
    import SwiftUI
    #if os(iOS)
        import UIKit
    #endif

    /// The seed's heart button, driven by `LikeButtonModel`: it flips at 0 ms with a spring bounce and
    /// a medium impact haptic, sends the *wanted* state in the background (taps during a request are
    /// coalesced), and on a failure the model rolls back and the button plays the error haptic.
    public struct HeartButton: View {
        let model: LikeButtonModel
        @State private var bounceScale: CGFloat = 1.0

        public init(model: LikeButtonModel) {
            self.model = model
        }

        public var body: some View {
            Button(action: tap) {
                HStack(spacing: 6) {
                    Image(systemName: model.isLiked ? "heart.fill" : "heart")
                        .font(.system(size: 17, weight: .semibold))
                        .foregroundStyle(model.isLiked ? Color.red : Color.gray)
                        .scaleEffect(bounceScale)
                    Text("\(model.likesCount)")
                        .font(.system(size: 13, weight: .bold, design: .rounded))
                        .foregroundStyle(model.isLiked ? Color.red : Color.primary)
                        .contentTransition(.numericText())
                }
            }
            .buttonStyle(.plain)
            .accessibilityLabel(model.isLiked ? "Unlike" : "Like")
            .accessibilityValue("\(model.likesCount) likes")
            .onChange(of: model.eventCount) {
                if case .failed? = model.lastEvent { Haptics.error() }
            }
        }

        private func tap() {
            Haptics.impact()
            withAnimation(.spring(response: 0.25, dampingFraction: 0.45)) {
                model.tap()
                bounceScale = 1.35
            }
            Task { @MainActor in
                try? await Task.sleep(for: .milliseconds(150))
                withAnimation(.easeOut(duration: 0.15)) { bounceScale = 1.0 }
            }
        }
    }

    /// The seed's haptics: a medium impact on tap, an error notification on rollback. iOS only (the
    /// feedback generators exist on iOS, iPadOS and Mac Catalyst); silent elsewhere.
    @MainActor
    enum Haptics {
        static func impact() {
            #if os(iOS)
                UIImpactFeedbackGenerator(style: .medium).impactOccurred()
            #endif
        }

        static func error() {
            #if os(iOS)
                UINotificationFeedbackGenerator().notificationOccurred(.error)
            #endif
        }
    }
#endif
