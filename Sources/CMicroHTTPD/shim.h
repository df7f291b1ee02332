#include <stdarg.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <microhttpd.h>

/* The daemon's epoll descriptor, for a server that drives MHD_USE_EPOLL itself.
   MHD_get_daemon_info is variadic, which Swift cannot call. */
static inline int counter_mhd_epoll_fd(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_EPOLL_FD);
    return info ? info->epoll_fd : -1;
}

#include <string.h>
#include <strings.h>

/* The library percent-decodes the path and the query arguments in place unless given this: ids
   are checked on the bytes the client sent, so nothing is decoded. Returns the length unchanged. */
static inline size_t counter_mhd_keep_escaped(void *cls, struct MHD_Connection *connection, char *text) {
    (void)cls;
    (void)connection;
    return strlen(text);
}

/* Framing that intermediaries may read differently from the library (request smuggling,
   RFC 9112 sections 5.1 and 6), found in a request's header fields. */
enum counter_framing_problem {
    COUNTER_FRAMING_OK = 0,
    /* Whitespace inside a field name ("Transfer-Encoding : chunked"). */
    COUNTER_FRAMING_SPACE_IN_NAME = 1,
    /* Both Content-Length and Transfer-Encoding. */
    COUNTER_FRAMING_BOTH_LENGTHS = 2,
    /* Transfer-Encoding other than exactly one "chunked". */
    COUNTER_FRAMING_TRANSFER_CODING = 3,
    /* Content-Length given more than once. */
    COUNTER_FRAMING_REPEATED_LENGTH = 4,
};

struct counter_framing_scan {
    int content_lengths;
    int transfer_encodings;
    int not_chunked;
    int space_in_name;
};

static enum MHD_Result counter_framing_visit(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    struct counter_framing_scan *scan = (struct counter_framing_scan *)cls;
    (void)kind;
    if (key == NULL) return MHD_YES;
    if (strpbrk(key, " \t") != NULL) scan->space_in_name = 1;
    if (strcasecmp(key, "Content-Length") == 0) {
        scan->content_lengths++;
    } else if (strcasecmp(key, "Transfer-Encoding") == 0) {
        scan->transfer_encodings++;
        if (value == NULL || strcasecmp(value, "chunked") != 0) scan->not_chunked = 1;
    }
    return MHD_YES;
}

/* The first framing problem of the request's header fields, or COUNTER_FRAMING_OK. */
static inline int counter_mhd_framing_problem(struct MHD_Connection *connection) {
    struct counter_framing_scan scan = {0, 0, 0, 0};
    MHD_get_connection_values(connection, MHD_HEADER_KIND, counter_framing_visit, &scan);
    if (scan.space_in_name) return COUNTER_FRAMING_SPACE_IN_NAME;
    if (scan.transfer_encodings > 0 && scan.content_lengths > 0) return COUNTER_FRAMING_BOTH_LENGTHS;
    if (scan.transfer_encodings > 1 || scan.not_chunked) return COUNTER_FRAMING_TRANSFER_CODING;
    if (scan.content_lengths > 1) return COUNTER_FRAMING_REPEATED_LENGTH;
    return COUNTER_FRAMING_OK;
}

/* The bytes of the connection's memory pool the request's head takes: its request line and header
   fields as read, plus the library's record (seven words) of each header field, cookie and query
   argument. What remains of the pool must hold the answer's head: the library closes the
   connection without an answer when it does not fit (after the handler acted). */
static inline size_t counter_mhd_head_footprint(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    size_t head = info ? info->header_size : 0;
    int records = MHD_get_connection_values(connection,
        (enum MHD_ValueKind)(MHD_HEADER_KIND | MHD_COOKIE_KIND | MHD_GET_ARGUMENT_KIND | MHD_FOOTER_KIND), NULL, NULL);
    return head + (size_t)(records > 0 ? records : 0) * 7 * sizeof(void *);
}
