/// The flush's statement for a batch that holds reactions of kinds other than `like`: one
/// statement writes the likes (as `LikeBatchApplier`'s own statement does) and the other kinds'
/// rows (`reactions`), moves `posts.likes_count` and each other kind's `reaction_counts` row by
/// exactly the rows that changed, and — with events — writes one outbox row per change, with its
/// kind. A batch of likes only never uses it: it runs the likes' statement, as it always did.
///
/// Parameters, as parallel arrays (every (user, post, kind) at most once in all, every post
/// existing and locked): `$1`–`$3` users, posts and times of likes, `$4`–`$6` of unlikes,
/// `$7`–`$10` users, posts, kinds and times of other kinds held, `$11`–`$14` of other kinds no
/// longer held. A time is Unix milliseconds, `0` for the transaction's. Returns, per count that
/// moved: the post, the kind (`NULL` for `likes_count`), the step and the new count.
enum ReactionStatement {
    static func text(onConflict: Bool, events: Bool, oneKindPerUser: Bool) -> String {
        let key = Key(onConflict: onConflict, events: events, oneKindPerUser: oneKindPerUser && events)
        return texts[key]!
    }

    private struct Key: Hashable {
        let onConflict: Bool
        let events: Bool
        let oneKindPerUser: Bool
    }

    /// Every variant, built once.
    private static let texts: [Key: String] = {
        var texts: [Key: String] = [:]
        for onConflict in [false, true] {
            texts[Key(onConflict: onConflict, events: false, oneKindPerUser: false)] = build(onConflict: onConflict, events: nil)
            for one in [false, true] {
                texts[Key(onConflict: onConflict, events: true, oneKindPerUser: one)] = build(onConflict: onConflict, events: one)
            }
        }
        return texts
    }()

    private static func at(_ column: String) -> String {
        "CASE WHEN \(column) > 0 THEN 'epoch'::timestamptz + \(column) * interval '1 millisecond' ELSE now() END"
    }

    /// - Parameter events: `nil` for no events; else whether switches become one event.
    private static func build(onConflict: Bool, events oneKindPerUser: Bool?) -> String {
        let likeInsertTail =
            onConflict
            ? """
            ON CONFLICT (user_id, post_id) DO UPDATE SET created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at
                WHERE likes.created_at IS NULL OR likes.created_at < EXCLUDED.created_at
            RETURNING likes.user_id, likes.post_id, (likes.xmax = 0) AS fresh
            """
            : "RETURNING user_id, post_id, true AS fresh"
        let reactionInsertTail =
            onConflict
            ? """
            ON CONFLICT (user_id, post_id, kind) DO UPDATE SET created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at
                WHERE reactions.created_at IS NULL OR reactions.created_at < EXCLUDED.created_at
            RETURNING reactions.user_id, reactions.post_id, reactions.kind, (reactions.xmax = 0) AS fresh
            """
            : "RETURNING user_id, post_id, kind, true AS fresh"
        var text = """
            WITH inserted AS (
                INSERT INTO likes (user_id, post_id, created_at, updated_at)
                SELECT user_id, post_id, at, at FROM (
                    SELECT user_id, post_id, \(at("ms")) AS at
                    FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS c(user_id, post_id, ms)
                ) c
                \(likeInsertTail)
            ),
            deleted AS (
                DELETE FROM likes l USING unnest($4::bigint[], $5::bigint[], $6::bigint[]) AS c(user_id, post_id, ms)
                WHERE l.user_id = c.user_id AND l.post_id = c.post_id
                RETURNING l.post_id, l.user_id, c.ms
            ),
            r_inserted AS (
                INSERT INTO reactions (user_id, post_id, kind, created_at, updated_at)
                SELECT user_id, post_id, kind, at, at FROM (
                    SELECT user_id, post_id, kind, \(at("ms")) AS at
                    FROM unnest($7::bigint[], $8::bigint[], $9::text[], $10::bigint[]) AS c(user_id, post_id, kind, ms)
                ) c
                \(reactionInsertTail)
            ),
            r_deleted AS (
                DELETE FROM reactions r USING unnest($11::bigint[], $12::bigint[], $13::text[], $14::bigint[]) AS c(user_id, post_id, kind, ms)
                WHERE r.user_id = c.user_id AND r.post_id = c.post_id AND r.kind = c.kind
                RETURNING r.post_id, r.user_id, r.kind, c.ms
            ),
            delta AS (
                SELECT post_id, sum(step) AS step FROM (
                    SELECT post_id, 1 AS step FROM inserted WHERE fresh
                    UNION ALL
                    SELECT post_id, -1 AS step FROM deleted
                ) steps
                GROUP BY post_id
                HAVING sum(step) <> 0
            ),
            counted AS (
                UPDATE posts p SET likes_count = p.likes_count + delta.step
                FROM delta WHERE p.id = delta.post_id
                RETURNING p.id, delta.step, p.likes_count
            ),
            r_delta AS (
                SELECT post_id, kind, sum(step) AS step FROM (
                    SELECT post_id, kind, 1 AS step FROM r_inserted WHERE fresh
                    UNION ALL
                    SELECT post_id, kind, -1 AS step FROM r_deleted
                ) steps
                GROUP BY post_id, kind
                HAVING sum(step) <> 0
            ),
            r_counted AS (
                INSERT INTO reaction_counts AS rc (post_id, kind, count)
                SELECT post_id, kind, step FROM r_delta ORDER BY post_id, kind
                ON CONFLICT (post_id, kind) DO UPDATE SET count = rc.count + EXCLUDED.count
                RETURNING rc.post_id, rc.kind, rc.count
            )
            """
        if let oneKindPerUser {
            // Every row that changed, with its kind ('like' for a likes row) and time.
            text += """
                ,
                changed AS (
                    SELECT i.post_id, i.user_id, 'like'::text AS kind, true AS liked, \(at("c.ms")) AS at
                    FROM inserted i JOIN unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS c(user_id, post_id, ms)
                        ON c.user_id = i.user_id AND c.post_id = i.post_id
                    WHERE i.fresh
                    UNION ALL
                    SELECT post_id, user_id, 'like', false, \(at("ms")) FROM deleted
                    UNION ALL
                    SELECT i.post_id, i.user_id, i.kind, true, \(at("c.ms"))
                    FROM r_inserted i JOIN unnest($7::bigint[], $8::bigint[], $9::text[], $10::bigint[]) AS c(user_id, post_id, kind, ms)
                        ON c.user_id = i.user_id AND c.post_id = i.post_id AND c.kind = i.kind
                    WHERE i.fresh
                    UNION ALL
                    SELECT post_id, user_id, kind, false, \(at("ms")) FROM r_deleted
                ),
                """
            if oneKindPerUser {
                // A user holds one kind at most before and after the transaction, so a pair
                // gained one kind and lost one at most: both together are one switch.
                text += """
                    event_rows AS (
                        SELECT post_id, user_id, coalesce(gained, lost) AS kind, gained IS NOT NULL AS liked,
                               CASE WHEN gained IS NOT NULL THEN lost END AS replaced_kind, at
                        FROM (
                            SELECT post_id, user_id,
                                   (array_agg(kind) FILTER (WHERE liked))[1] AS gained,
                                   (array_agg(kind) FILTER (WHERE NOT liked))[1] AS lost,
                                   max(at) AS at
                            FROM changed GROUP BY post_id, user_id
                        ) pairs
                    ),
                    """
            } else {
                text += """
                    event_rows AS (
                        SELECT post_id, user_id, kind, liked, NULL::text AS replaced_kind, at FROM changed
                    ),
                    """
            }
            // As the likes' statement: the clock's row lock is taken last (after every count),
            // so ids follow commit order.
            text += """
                clock AS (
                    UPDATE counter_event_clock SET last_id = last_id + (SELECT count(*) FROM event_rows)
                    WHERE (SELECT count(*) FROM counted) + (SELECT count(*) FROM r_counted) >= 0 AND EXISTS (SELECT 1 FROM event_rows)
                    RETURNING last_id - (SELECT count(*) FROM event_rows) AS before_first
                ),
                events AS (
                    INSERT INTO counter_like_events (id, post_id, user_id, liked, liked_at, kind, replaced_kind)
                    SELECT clock.before_first + row_number() OVER (ORDER BY e.at, e.post_id, e.user_id, e.kind),
                           e.post_id, e.user_id, e.liked, e.at, NULLIF(e.kind, 'like'), e.replaced_kind
                    FROM event_rows e, clock
                )
                """
        }
        text += """

            SELECT id, NULL::text AS kind, step, likes_count FROM counted
            UNION ALL
            SELECT c.post_id, c.kind, d.step, c.count FROM r_counted c JOIN r_delta d ON d.post_id = c.post_id AND d.kind = c.kind
            """
        return text
    }
}
