#if canImport(SwiftUI)
    import CounterClient
    import SwiftUI

    /// The kinds an app offers in its picker and how many a user may hold of a post: the
    /// deployment's `--reactions` and `--reactions-per-user` (the node does not send them, so the
    /// app is configured with the same). With `--reactions open`, `kinds` is what the app offers.
    public struct ReactionOptions: Sendable, Equatable {
        /// The kinds the full list offers, in its order.
        public var kinds: [String]
        /// `.one`: a kind chosen replaces the one held (Facebook); `.many`: each kind is its own
        /// toggle (Slack).
        public var mode: ReactionStateMachine.Mode

        public init(kinds: [String], mode: ReactionStateMachine.Mode) {
            self.kinds = kinds
            self.mode = mode
        }

        /// How a kind shows: its emoji when the app knows it, else its name as a shortcode.
        public static func emoji(for kind: String) -> String {
            emojis[kind] ?? ":\(kind):"
        }

        private static let emojis: [String: String] = [
            "like": "👍", "love": "❤️", "care": "🥰", "haha": "😆", "wow": "😮", "sad": "😢", "angry": "😠",
            "thumbsup": "👍", "thumbsdown": "👎", "laugh": "😄", "confused": "😕", "heart": "❤️", "hooray": "🎉",
            "rocket": "🚀", "eyes": "👀", "fire": "🔥", "clap": "👏", "pray": "🙏", "thinking": "🤔", "hundred": "💯",
        ]
    }

    /// A post's reactions, driven by `ReactionPickerModel`: a row of chips (each kind with a count,
    /// the largest first; the user's own highlighted) that toggle at a tap, a "+" that opens every
    /// kind offered, and a long press that lists them as a menu. A tap shows at 0 ms (with one kind per
    /// user, a switch moves both counts at once) with a medium impact haptic; the model sends the
    /// *wanted* state in the background, and on a failure it rolls back and the picker plays the
    /// error haptic.
    public struct ReactionPicker: View {
        let model: ReactionPickerModel
        let options: ReactionOptions
        @State private var showsAll = false

        public init(model: ReactionPickerModel, options: ReactionOptions) {
            self.model = model
            self.options = options
        }

        public var body: some View {
            HStack(spacing: 6) {
                ForEach(model.counts, id: \.kind) { shown in
                    chip(shown.kind, count: shown.count)
                }
                Button {
                    showsAll = true
                } label: {
                    Image(systemName: model.counts.isEmpty ? "face.smiling" : "plus")
                        .font(.system(size: 13, weight: .semibold))
                        .frame(minWidth: 28, minHeight: 24)
                        .background(Capsule().fill(Color.secondary.opacity(0.12)))
                }
                .buttonStyle(.plain)
                .accessibilityLabel("Add a reaction")
                .popover(isPresented: $showsAll) {
                    ReactionList(model: model, options: options) { showsAll = false }
                        .presentationCompactAdaptation(.popover)
                }
            }
            // A long press (a secondary click on a Mac) lists every kind offered, as a menu; the
            // system cancels the chip's tap when the menu opens.
            .contextMenu {
                ForEach(options.kinds, id: \.self) { kind in
                    Button {
                        tap(kind)
                    } label: {
                        if model.isMine(kind) {
                            Label("\(ReactionOptions.emoji(for: kind)) \(kind)", systemImage: "checkmark")
                        } else {
                            Text(verbatim: "\(ReactionOptions.emoji(for: kind)) \(kind)")
                        }
                    }
                }
            }
            .onChange(of: model.eventCount) {
                if case .failed? = model.lastEvent { Haptics.error() }
            }
        }

        private func chip(_ kind: String, count: Int64) -> some View {
            let mine = model.isMine(kind)
            return Button {
                tap(kind)
            } label: {
                HStack(spacing: 3) {
                    Text(ReactionOptions.emoji(for: kind))
                    Text("\(count)")
                        .font(.system(size: 13, weight: .bold, design: .rounded))
                        .contentTransition(.numericText())
                }
                .padding(.horizontal, 8)
                .padding(.vertical, 3)
                .background(Capsule().fill(mine ? Color.accentColor.opacity(0.2) : Color.secondary.opacity(0.12)))
                .overlay(Capsule().strokeBorder(mine ? Color.accentColor : Color.clear, lineWidth: 1))
            }
            .buttonStyle(.plain)
            .accessibilityLabel(kind)
            .accessibilityValue("\(count)")
            .accessibilityAddTraits(mine ? .isSelected : [])
        }

        private func tap(_ kind: String) {
            Haptics.impact()
            withAnimation(.spring(response: 0.25, dampingFraction: 0.6)) { model.tap(kind) }
        }
    }

    /// Every kind offered, the user's own highlighted: a tap toggles it (with one kind per user,
    /// chooses it) and closes the list.
    private struct ReactionList: View {
        let model: ReactionPickerModel
        let options: ReactionOptions
        let close: () -> Void

        var body: some View {
            HStack(spacing: 4) {
                ForEach(options.kinds, id: \.self) { kind in
                    Button {
                        Haptics.impact()
                        withAnimation(.spring(response: 0.25, dampingFraction: 0.6)) { model.tap(kind) }
                        close()
                    } label: {
                        Text(ReactionOptions.emoji(for: kind))
                            .font(.system(size: 28))
                            .padding(6)
                            .background(Circle().fill(model.isMine(kind) ? Color.accentColor.opacity(0.2) : Color.clear))
                    }
                    .buttonStyle(.plain)
                    .accessibilityLabel(kind)
                    .accessibilityAddTraits(model.isMine(kind) ? .isSelected : [])
                }
            }
            .padding(8)
        }
    }
#endif
