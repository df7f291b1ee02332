/* The node's HTTP engine on h2o: see include/counter_h2o.h. Everything here runs on the event
   loop's thread except counter_h2o_answer, counter_h2o_stop_listening, counter_h2o_shut_down
   and counter_h2o_connection_count, which only hand a message to the loop (or read a counter). */
#define _GNU_SOURCE
#include "counter_h2o.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <h2o.h>
#include <h2o/http1.h>
#include <h2o/http2.h>
#include <h2o/socket/evloop.h>

/* picohttpparser, which h2o carries and exports, without a header of its own in the package. */
struct phr_header {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
};
int phr_parse_request(const char *buf, size_t len, const char **method, size_t *method_len, const char **path,
                      size_t *path_len, int *minor_version, struct phr_header *headers, size_t *num_headers,
                      size_t last_len);

/* The first members of h2o's HTTP/1 connection (lib/http1.c, h2o 2.2): the socket whose input
   still holds the request's head while the request is handled. */
struct http1_connection_prefix {
    h2o_conn_t super;
    h2o_socket_t *sock;
};

enum message_kind { MESSAGE_ANSWER, MESSAGE_STOP_LISTENING, MESSAGE_SHUT_DOWN };

struct listener {
    counter_h2o_server *server;
    h2o_socket_t *socket; /* NULL once closed, or if there is none */
    int fd;
    h2o_accept_ctx_t accept_context;
    /* Out of descriptors (or memory): accepting pauses for a moment instead of spinning. */
    h2o_timeout_entry_t resume_accepting;
};

struct counter_h2o_server {
    h2o_globalconf_t config;
    h2o_context_t context;
    h2o_evloop_t *loop;
    /* cleartext (HTTP/1.1, and HTTP/2 by prior knowledge), then TLS (ALPN) if configured */
    struct listener listeners[2];
    h2o_multithread_receiver_t receiver;
    counter_h2o_callbacks callbacks;
    void *callback_context;
    size_t maximum_connections;
    h2o_linklist_t connections;
    atomic_size_t connection_count;
    int exiting;
    struct timespec exit_deadline;
    SSL_CTX *tls;
    counter_h2o_configuration configuration;
};


struct counter_h2o_pending {
    /* The request, until h2o disposes of it (its answer sent, or its client gone). */
    h2o_req_t *request;
    int answered;
    counter_h2o_server *server;
};

struct connection {
    h2o_linklist_t link;
    counter_h2o_server *server;
    int fd;
};

struct message {
    h2o_multithread_message_t super;
    enum message_kind kind;
    counter_h2o_pending *pending;
    int status;
    /* content type, header names and values, body: one after another in `bytes` */
    size_t content_type_length;
    size_t header_count;
    size_t body_length;
    size_t *lengths; /* name, value, name, value, ... */
    char *bytes;
};

/* ---- answers ---------------------------------------------------------------------------- */

static const char *reason_phrase(int status)
{
    switch (status) {
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 304: return "Not Modified";
    case 307: return "Temporary Redirect";
    case 308: return "Permanent Redirect";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 411: return "Length Required";
    case 412: return "Precondition Failed";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 417: return "Expectation Failed";
    case 421: return "Misdirected Request";
    case 422: return "Unprocessable Content";
    case 425: return "Too Early";
    case 428: return "Precondition Required";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "Status";
    }
}

static int is_connection_close(const char *name, size_t name_length, const char *value, size_t value_length)
{
    return h2o_lcstris(name, name_length, H2O_STRLIT("connection")) && h2o_lcstris(value, value_length, H2O_STRLIT("close"));
}

/* Sets the answer's status and headers on `req` (copied into its pool). */
static void set_head(h2o_req_t *req, int status, const char *content_type, size_t content_type_length, size_t header_count,
                     const char *const *names, const size_t *name_lengths, const char *const *values,
                     const size_t *value_lengths, size_t body_length)
{
    req->res.status = status;
    req->res.reason = reason_phrase(status);
    req->res.content_length = body_length;
    h2o_iovec_t type = h2o_strdup(&req->pool, content_type, content_type_length);
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, "Content-Type", type.base, type.len);
    for (size_t i = 0; i != header_count; ++i) {
        if (is_connection_close(names[i], name_lengths[i], values[i], value_lengths[i])) {
            req->http1_is_persistent = 0;
            continue;
        }
        h2o_iovec_t original = h2o_strdup(&req->pool, names[i], name_lengths[i]);
        h2o_iovec_t lower = h2o_strdup(&req->pool, names[i], name_lengths[i]);
        h2o_strtolower(lower.base, lower.len);
        h2o_iovec_t value = h2o_strdup(&req->pool, values[i], value_lengths[i]);
        h2o_add_header_by_str(&req->pool, &req->res.headers, lower.base, lower.len, 1, original.base, value.base, value.len);
    }
}

static void send_body(h2o_req_t *req, const void *body, size_t body_length)
{
    static h2o_generator_t generator = {NULL, NULL};
    h2o_iovec_t buffer = h2o_strdup(&req->pool, body, body_length);
    h2o_start_response(req, &generator);
    if (h2o_memis(req->input.method.base, req->input.method.len, H2O_STRLIT("HEAD")))
        h2o_send(req, NULL, 0, H2O_SEND_STATE_FINAL);
    else
        h2o_send(req, &buffer, 1, H2O_SEND_STATE_FINAL);
}

static void send_response(h2o_req_t *req, const counter_h2o_response *response)
{
    set_head(req, response->status, response->content_type, response->content_type_length, response->header_count,
             response->header_names, response->header_name_lengths, response->header_values, response->header_value_lengths,
             response->body_length);
    send_body(req, response->body, response->body_length);
}

void counter_h2o_respond(counter_h2o_request *request, const counter_h2o_response *response)
{
    send_response(request->engine_request, response);
}

/* ---- requests ----------------------------------------------------------------------------- */

/* The framing problem of an HTTP/1 request whose head is at the start of `input`. */
static int framing_problem(const char *input, size_t length)
{
    const char *method, *path;
    size_t method_length, path_length, header_count = H2O_MAX_HEADERS;
    int minor_version;
    struct phr_header headers[H2O_MAX_HEADERS];
    if (phr_parse_request(input, length, &method, &method_length, &path, &path_length, &minor_version, headers, &header_count,
                          0) <= 0)
        return COUNTER_FRAMING_OK; /* h2o parsed it: nothing else to say */
    int content_lengths = 0, transfer_encodings = 0, not_chunked = 0;
    for (size_t i = 0; i != header_count; ++i) {
        if (h2o_lcstris(headers[i].name, headers[i].name_len, H2O_STRLIT("content-length"))) {
            content_lengths++;
        } else if (h2o_lcstris(headers[i].name, headers[i].name_len, H2O_STRLIT("transfer-encoding"))) {
            transfer_encodings++;
            if (!h2o_lcstris(headers[i].value, headers[i].value_len, H2O_STRLIT("chunked")))
                not_chunked = 1;
        }
    }
    if (transfer_encodings > 0 && content_lengths > 0)
        return COUNTER_FRAMING_BOTH_LENGTHS;
    if (transfer_encodings > 1 || not_chunked)
        return COUNTER_FRAMING_TRANSFER_CODING;
    if (content_lengths > 1)
        return COUNTER_FRAMING_REPEATED_LENGTH;
    return COUNTER_FRAMING_OK;
}

static size_t head_bytes(h2o_req_t *req)
{
    /* "METHOD target HTTP/1.1\r\n", "Host: ...\r\n", each "name: value\r\n", the final "\r\n" */
    size_t bytes = req->input.method.len + req->input.path.len + 12 + req->input.authority.len + 8 + 2;
    for (size_t i = 0; i != req->headers.size; ++i)
        bytes += req->headers.entries[i].name->len + req->headers.entries[i].value.len + 4;
    return bytes;
}

struct handler {
    h2o_handler_t super;
    counter_h2o_server *server;
};

static int on_request(h2o_handler_t *self, h2o_req_t *req)
{
    counter_h2o_server *server = ((struct handler *)self)->server;
    counter_h2o_request request = {
        .method = req->input.method.base,
        .method_length = req->input.method.len,
        .target = req->input.path.base,
        .target_length = req->input.path.len,
        .body = (const uint8_t *)req->entity.base,
        .body_length = req->entity.base != NULL ? req->entity.len : 0,
        .version = req->version,
        .head_bytes = head_bytes(req),
        .framing_problem = COUNTER_FRAMING_OK,
        .engine_request = req,
    };
    /* Only a request with a body has Content-Length or Transfer-Encoding, which h2o takes out
       of the header list: its head is read again, as sent, from the connection's input. */
    if (memchr(req->input.path.base, 0, req->input.path.len) != NULL) {
        request.framing_problem = COUNTER_FRAMING_NUL_IN_TARGET;
    } else if (req->version < 0x200 && req->entity.base != NULL) {
        h2o_socket_t *sock = ((struct http1_connection_prefix *)req->conn)->sock;
        if (sock != NULL && sock->input != NULL)
            request.framing_problem = framing_problem(sock->input->bytes, sock->input->size);
    }
    server->callbacks.request(server->callback_context, &request);
    return 0;
}

const char *counter_h2o_header(counter_h2o_request *request, const char *lower_case_name, size_t name_length,
                               size_t *value_length)
{
    h2o_req_t *req = request->engine_request;
    ssize_t index = h2o_find_header_by_str(&req->headers, lower_case_name, name_length, -1);
    if (index == -1)
        return NULL;
    *value_length = req->headers.entries[index].value.len;
    return req->headers.entries[index].value.base;
}

/* ---- suspended requests ----------------------------------------------------------------- */

static void request_disposed(void *slot)
{
    counter_h2o_pending *pending = *(counter_h2o_pending **)slot;
    if (pending->answered) {
        pending->server->callbacks.answer_done(pending->server->callback_context);
        free(pending);
    } else {
        pending->request = NULL;
    }
}

counter_h2o_pending *counter_h2o_suspend(counter_h2o_server *server, counter_h2o_request *request)
{
    h2o_req_t *req = request->engine_request;
    counter_h2o_pending *pending = malloc(sizeof(*pending));
    if (pending == NULL)
        abort();
    pending->request = req;
    pending->answered = 0;
    pending->server = server;
    counter_h2o_pending **slot = h2o_mem_alloc_shared(&req->pool, sizeof(*slot), request_disposed);
    *slot = pending;
    return pending;
}

static struct message *new_message(enum message_kind kind, size_t extra)
{
    struct message *message = calloc(1, sizeof(*message) + extra);
    if (message == NULL)
        abort();
    message->kind = kind;
    return message;
}

void counter_h2o_answer(counter_h2o_server *server, counter_h2o_pending *pending, const counter_h2o_response *response)
{
    size_t text = response->content_type_length + response->body_length;
    for (size_t i = 0; i != response->header_count; ++i)
        text += response->header_name_lengths[i] + response->header_value_lengths[i];
    size_t lengths = 2 * response->header_count * sizeof(size_t);
    struct message *message = new_message(MESSAGE_ANSWER, lengths + text);
    message->pending = pending;
    message->status = response->status;
    message->content_type_length = response->content_type_length;
    message->header_count = response->header_count;
    message->body_length = response->body_length;
    message->lengths = (size_t *)(message + 1);
    message->bytes = (char *)message->lengths + lengths;
    char *cursor = message->bytes;
    memcpy(cursor, response->content_type, response->content_type_length);
    cursor += response->content_type_length;
    for (size_t i = 0; i != response->header_count; ++i) {
        message->lengths[2 * i] = response->header_name_lengths[i];
        message->lengths[2 * i + 1] = response->header_value_lengths[i];
        memcpy(cursor, response->header_names[i], response->header_name_lengths[i]);
        cursor += response->header_name_lengths[i];
        memcpy(cursor, response->header_values[i], response->header_value_lengths[i]);
        cursor += response->header_value_lengths[i];
    }
    if (response->body_length != 0)
        memcpy(cursor, response->body, response->body_length);
    h2o_multithread_send_message(&server->receiver, &message->super);
}

static void deliver_answer(counter_h2o_server *server, struct message *message)
{
    counter_h2o_pending *pending = message->pending;
    pending->answered = 1;
    h2o_req_t *req = pending->request;
    if (req == NULL) {
        /* the client has gone: nothing to send */
        server->callbacks.answer_done(server->callback_context);
        free(pending);
        return;
    }
    const char *names[message->header_count + 1], *values[message->header_count + 1];
    size_t name_lengths[message->header_count + 1], value_lengths[message->header_count + 1];
    const char *cursor = message->bytes + message->content_type_length;
    for (size_t i = 0; i != message->header_count; ++i) {
        names[i] = cursor;
        name_lengths[i] = message->lengths[2 * i];
        cursor += name_lengths[i];
        values[i] = cursor;
        value_lengths[i] = message->lengths[2 * i + 1];
        cursor += value_lengths[i];
    }
    set_head(req, message->status, message->bytes, message->content_type_length, message->header_count, names, name_lengths,
             values, value_lengths, message->body_length);
    send_body(req, cursor, message->body_length);
}

/* ---- the engine's own answers ------------------------------------------------------------ */

struct replacement {
    h2o_ostream_t super;
    h2o_iovec_t body;
};

static void send_replacement(h2o_ostream_t *self, h2o_req_t *req, h2o_iovec_t *bufs, size_t count, h2o_send_state_t state)
{
    struct replacement *replacement = (struct replacement *)self;
    if (state == H2O_SEND_STATE_IN_PROGRESS) {
        h2o_ostream_send_next(self, req, NULL, 0, state);
    } else if (replacement->body.base != NULL && !h2o_memis(req->input.method.base, req->input.method.len, H2O_STRLIT("HEAD"))) {
        h2o_iovec_t body = replacement->body;
        replacement->body = h2o_iovec_init(NULL, 0);
        h2o_ostream_send_next(self, req, &body, 1, state);
    } else {
        h2o_ostream_send_next(self, req, NULL, 0, state);
    }
}

struct refusal_filter {
    h2o_filter_t super;
    counter_h2o_server *server;
};

struct refusal_context {
    counter_h2o_refusal refusal;
    h2o_ostream_t **slot;
    int replaced;
};

void counter_h2o_refuse(counter_h2o_refusal *refusal, const counter_h2o_response *response)
{
    struct refusal_context *context = (struct refusal_context *)refusal;
    h2o_req_t *req = refusal->engine_request;
    /* the engine's headers go; whether the connection stays open is the engine's call (set_head
       only ever closes it) */
    memset(&req->res.headers, 0, sizeof(req->res.headers));
    set_head(req, response->status, response->content_type, response->content_type_length, response->header_count,
             response->header_names, response->header_name_lengths, response->header_values, response->header_value_lengths,
             response->body_length);
    struct replacement *replacement = (void *)h2o_add_ostream(req, sizeof(*replacement), context->slot);
    replacement->super.do_send = send_replacement;
    replacement->body = h2o_strdup(&req->pool, (const char *)response->body, response->body_length);
    context->slot = &replacement->super.next;
    context->replaced = 1;
}

static int is_node_answer(h2o_req_t *req)
{
    /* every answer of the node takes its reason from reason_phrase */
    return req->res.reason == reason_phrase(req->res.status);
}

static void on_setup_ostream(h2o_filter_t *self, h2o_req_t *req, h2o_ostream_t **slot)
{
    counter_h2o_server *server = ((struct refusal_filter *)self)->server;
    if (req->res.status >= 400 && !is_node_answer(req)) {
        const char *reason = req->res.reason != NULL ? req->res.reason : "";
        struct refusal_context context = {
            .refusal = {.status = req->res.status, .message = reason, .message_length = strlen(reason), .engine_request = req},
            .slot = slot,
        };
        server->callbacks.refusal(server->callback_context, &context.refusal);
        slot = context.slot;
    }
    h2o_setup_next_ostream(req, slot);
}

/* ---- connections -------------------------------------------------------------------------- */

static void connection_closed(void *data)
{
    struct connection *connection = data;
    h2o_linklist_unlink(&connection->link);
    atomic_fetch_sub(&connection->server->connection_count, 1);
    free(connection);
}

static void on_accept(h2o_socket_t *listener, const char *err)
{
    struct listener *self = listener->data;
    counter_h2o_server *server = self->server;
    if (err != NULL)
        return;
    for (int i = 0; i != 64; ++i) {
        int fd = accept4(self->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd == -1) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* the waiting connection stays in the backlog; epoll would wake us at once */
                h2o_socket_read_stop(listener);
                h2o_timeout_link(server->loop, &server->context.hundred_ms_timeout, &self->resume_accepting);
            }
            return;
        }
        if (atomic_load(&server->connection_count) >= server->maximum_connections || server->exiting) {
            close(fd);
            continue;
        }
        int on = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
        h2o_socket_t *sock = h2o_evloop_socket_create(server->loop, fd, H2O_SOCKET_FLAG_IS_ACCEPTED_CONNECTION);
        struct connection *connection = malloc(sizeof(*connection));
        if (connection == NULL)
            abort();
        *connection = (struct connection){.server = server, .fd = fd};
        h2o_linklist_insert(&server->connections, &connection->link);
        atomic_fetch_add(&server->connection_count, 1);
        sock->on_close.cb = connection_closed;
        sock->on_close.data = connection;
        h2o_accept(&self->accept_context, sock);
    }
}

size_t counter_h2o_connection_count(counter_h2o_server *server)
{
    return atomic_load(&server->connection_count);
}

/* ---- the loop ------------------------------------------------------------------------------ */

static void resume_accepting(h2o_timeout_entry_t *entry)
{
    struct listener *listener = H2O_STRUCT_FROM_MEMBER(struct listener, resume_accepting, entry);
    if (listener->socket != NULL)
        h2o_socket_read_start(listener->socket, on_accept);
}

static void close_listeners(counter_h2o_server *server)
{
    for (size_t i = 0; i != 2; ++i) {
        struct listener *listener = &server->listeners[i];
        if (h2o_timeout_is_linked(&listener->resume_accepting))
            h2o_timeout_unlink(&listener->resume_accepting);
        if (listener->socket == NULL)
            continue;
        h2o_socket_read_stop(listener->socket);
        h2o_socket_close(listener->socket); /* closes the listening socket */
        listener->socket = NULL;
    }
}

static void on_messages(h2o_multithread_receiver_t *receiver, h2o_linklist_t *messages)
{
    counter_h2o_server *server = H2O_STRUCT_FROM_MEMBER(counter_h2o_server, receiver, receiver);
    while (!h2o_linklist_is_empty(messages)) {
        struct message *message = H2O_STRUCT_FROM_MEMBER(struct message, super.link, messages->next);
        h2o_linklist_unlink(&message->super.link);
        switch (message->kind) {
        case MESSAGE_ANSWER:
            deliver_answer(server, message);
            break;
        case MESSAGE_STOP_LISTENING:
            close_listeners(server);
            h2o_context_request_shutdown(&server->context);
            server->callbacks.stopped_listening(server->callback_context);
            break;
        case MESSAGE_SHUT_DOWN:
            close_listeners(server);
            server->exiting = 1;
            clock_gettime(CLOCK_MONOTONIC, &server->exit_deadline);
            server->exit_deadline.tv_sec += 1;
            for (h2o_linklist_t *node = server->connections.next; node != &server->connections; node = node->next) {
                struct connection *connection = H2O_STRUCT_FROM_MEMBER(struct connection, link, node);
                shutdown(connection->fd, SHUT_RDWR);
            }
            break;
        }
        free(message);
    }
}

void counter_h2o_stop_listening(counter_h2o_server *server)
{
    h2o_multithread_send_message(&server->receiver, &new_message(MESSAGE_STOP_LISTENING, 0)->super);
}

void counter_h2o_shut_down(counter_h2o_server *server)
{
    h2o_multithread_send_message(&server->receiver, &new_message(MESSAGE_SHUT_DOWN, 0)->super);
}

static int past_deadline(counter_h2o_server *server)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec > server->exit_deadline.tv_sec ||
           (now.tv_sec == server->exit_deadline.tv_sec && now.tv_nsec >= server->exit_deadline.tv_nsec);
}

/* ---- making and freeing ------------------------------------------------------------------- */

static SSL_CTX *tls_context(const char *certificate, const char *key, const char **error)
{
    SSL_CTX *tls = SSL_CTX_new(TLS_server_method());
    if (tls == NULL) {
        *error = "OpenSSL could not make a TLS context";
        return NULL;
    }
    SSL_CTX_set_min_proto_version(tls, TLS1_2_VERSION);
    SSL_CTX_set_options(tls, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
    if (SSL_CTX_use_certificate_chain_file(tls, certificate) != 1) {
        *error = "the TLS certificate file cannot be read as PEM";
        SSL_CTX_free(tls);
        return NULL;
    }
    if (SSL_CTX_use_PrivateKey_file(tls, key, SSL_FILETYPE_PEM) != 1) {
        *error = "the TLS key file cannot be read as a PEM private key";
        SSL_CTX_free(tls);
        return NULL;
    }
    if (SSL_CTX_check_private_key(tls) != 1) {
        *error = "the TLS key does not match the certificate";
        SSL_CTX_free(tls);
        return NULL;
    }
    h2o_ssl_register_alpn_protocols(tls, h2o_http2_alpn_protocols);
    return tls;
}

counter_h2o_server *counter_h2o_create(const counter_h2o_configuration *configuration, counter_h2o_callbacks callbacks,
                                       void *context, const char **error)
{
    SSL_CTX *tls = NULL;
    if (configuration->tls_listening_socket >= 0) {
        tls = tls_context(configuration->tls_certificate_file, configuration->tls_key_file, error);
        if (tls == NULL)
            return NULL;
    }
    counter_h2o_server *server = calloc(1, sizeof(*server));
    if (server == NULL)
        abort();
    server->tls = tls;
    server->callbacks = callbacks;
    server->callback_context = context;
    server->configuration = *configuration;
    server->maximum_connections = configuration->maximum_connections;
    h2o_linklist_init_anchor(&server->connections);
    return server;
}

/* Sets h2o up on the loop's thread: h2o keeps per-thread state (its buffers' recycling lists) that
   the loop's sockets, timers and pools must share with the thread that runs them. */
static void set_up(counter_h2o_server *server)
{
    const counter_h2o_configuration *configuration = &server->configuration;
    h2o_config_init(&server->config);
    server->config.server_name = h2o_iovec_init(NULL, 0); /* no Server header */
    server->config.max_request_entity_size = configuration->maximum_body_bytes;
    server->config.http1.req_timeout = configuration->idle_timeout_milliseconds;
    server->config.http1.upgrade_to_http2 = 1;
    server->config.http2.idle_timeout = configuration->idle_timeout_milliseconds;
    server->config.http2.graceful_shutdown_timeout = 1000;
    server->config.http2.max_concurrent_requests_per_connection = configuration->maximum_streams_per_connection;
    h2o_hostconf_t *host = h2o_config_register_host(&server->config, h2o_iovec_init(H2O_STRLIT("default")), 65535);
    h2o_pathconf_t *root = h2o_config_register_path(host, "/", 0);
    struct handler *handler = (struct handler *)h2o_create_handler(root, sizeof(*handler));
    handler->super.on_req = on_request;
    handler->server = server;
    /* The engine's own refusals, on the path the request was bound to or, when it was refused
       before it was routed, on the host's fallback path. */
    h2o_pathconf_t *paths[] = {root, &host->fallback_path};
    for (size_t i = 0; i != 2; ++i) {
        struct refusal_filter *filter = (struct refusal_filter *)h2o_create_filter(paths[i], sizeof(*filter));
        filter->super.on_setup_ostream = on_setup_ostream;
        filter->server = server;
    }

    server->loop = h2o_evloop_create();
    h2o_context_init(&server->context, server->loop, &server->config);
    h2o_multithread_register_receiver(server->context.queue, &server->receiver, on_messages);
    int sockets[] = {configuration->listening_socket, configuration->tls_listening_socket};
    for (size_t i = 0; i != 2; ++i) {
        struct listener *listener = &server->listeners[i];
        listener->server = server;
        listener->fd = sockets[i];
        listener->accept_context.ctx = &server->context;
        listener->accept_context.hosts = server->config.hosts;
        listener->accept_context.ssl_ctx = i == 1 ? server->tls : NULL;
        listener->resume_accepting.cb = resume_accepting;
        if (sockets[i] < 0)
            continue;
        listener->socket = h2o_evloop_socket_create(server->loop, sockets[i], H2O_SOCKET_FLAG_DONT_READ);
        listener->socket->data = listener;
        h2o_socket_read_start(listener->socket, on_accept);
    }
}

/* Frees what set_up made, on the loop's thread, unless a connection would not close. */
static void tear_down(counter_h2o_server *server)
{
    if (atomic_load(&server->connection_count) != 0)
        return; /* a connection would not close: its memory is left to the process's end */
    close_listeners(server);
    h2o_multithread_unregister_receiver(server->context.queue, &server->receiver);
    /* HTTP/2's graceful shutdown (counter_h2o_stop_listening) waits on a timer of its own */
    if (h2o_timeout_is_linked(&server->context.http2._graceful_shutdown_timeout))
        h2o_timeout_unlink(&server->context.http2._graceful_shutdown_timeout);
    h2o_context_dispose(&server->context);
    h2o_evloop_destroy(server->loop);
    h2o_config_dispose(&server->config);
}

void counter_h2o_run(counter_h2o_server *server)
{
    pthread_setname_np(pthread_self(), "http-loop"); /* for top, perf and /proc */
    /* h2o writes answers with writev, which raises SIGPIPE when the client has closed its end
       (a client that sends pipelined requests and leaves): by default that ends the process. On
       this thread the signal stays blocked, so the write fails with EPIPE and h2o closes the
       connection, whatever the embedding process does with SIGPIPE. */
    sigset_t pipe_signal;
    sigemptyset(&pipe_signal);
    sigaddset(&pipe_signal, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_signal, NULL);
    set_up(server);
    server->callbacks.started(server->callback_context);
    for (;;) {
        if (server->exiting && (atomic_load(&server->connection_count) == 0 || past_deadline(server)))
            break;
        h2o_evloop_run(server->loop, server->exiting ? 10 : INT32_MAX);
    }
    tear_down(server);
}

void counter_h2o_destroy(counter_h2o_server *server)
{
    if (server->tls != NULL)
        SSL_CTX_free(server->tls);
    free(server);
}
