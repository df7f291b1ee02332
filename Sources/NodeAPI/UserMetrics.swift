/// The end-user figures of `/metrics`: tokens refused by reason, tokens remembered as verified,
/// writes refused by the per-user limit and the users it tracks.
enum UserMetrics {
    static func render(_ users: UserAccess, into text: inout String) {
        text += "# HELP counter_user_token_refusals_total End-user tokens refused (answered 401), by reason.\n"
        text += "# TYPE counter_user_token_refusals_total counter\n"
        for (code, count) in users.refusalCounts {
            text += "counter_user_token_refusals_total{code=\"\(code.rawValue)\"} \(count)\n"
        }
        MetricsText.single(
            "counter_user_tokens_remembered", "gauge", "End-user tokens remembered as verified (until they expire).",
            "\(users.verifier.rememberedTokens)", into: &text)
        MetricsText.single(
            "counter_rate_limited_total", "counter", "End users' writes refused by the per-user limit (answered 429).",
            "\(users.limiter?.limitedCount ?? 0)", into: &text)
        MetricsText.single(
            "counter_rate_limited_users", "gauge", "End users with a write-limit bucket kept.",
            "\(users.limiter?.trackedUsers ?? 0)", into: &text)
    }
}
