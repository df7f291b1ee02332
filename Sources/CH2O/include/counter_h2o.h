/* The node's HTTP engine: h2o (libh2o-evloop) serving HTTP/1.1 and HTTP/2 on one event loop
   thread, with requests answered later from any thread. Only this small interface is seen by
   Swift (NodeHTTP's HTTPServer); h2o's own headers stay in counter_h2o.c. */
#ifndef COUNTER_H2O_H
#define COUNTER_H2O_H

#include <stddef.h>
#include <stdint.h>

typedef struct counter_h2o_server counter_h2o_server;
typedef struct counter_h2o_pending counter_h2o_pending;

/* Framing that intermediaries may read differently from the engine (request smuggling,
   RFC 9112 sections 5.1 and 6), found in an HTTP/1 request's header fields. (Whitespace in a
   field name never gets this far: the engine's parser refuses it.) */
enum counter_framing_problem {
    COUNTER_FRAMING_OK = 0,
    /* Both Content-Length and Transfer-Encoding. */
    COUNTER_FRAMING_BOTH_LENGTHS = 2,
    /* Transfer-Encoding other than exactly one "chunked". */
    COUNTER_FRAMING_TRANSFER_CODING = 3,
    /* Content-Length given more than once. */
    COUNTER_FRAMING_REPEATED_LENGTH = 4,
    /* A NUL byte in the request target (HTTP/1's parser refuses it itself; HTTP/2's :path). */
    COUNTER_FRAMING_NUL_IN_TARGET = 5,
};

/* A request as the engine read it, valid during the request callback only. */
typedef struct counter_h2o_request {
    const char *method;
    size_t method_length;
    /* The request target as sent (HTTP/1's target, HTTP/2's :path): never decoded. */
    const char *target;
    size_t target_length;
    const uint8_t *body;
    size_t body_length;
    /* 0x100, 0x101 or 0x200. */
    int version;
    /* The bytes of the request's head: request line (or pseudo-headers) and header fields. */
    size_t head_bytes;
    /* An enum counter_framing_problem. */
    int framing_problem;
    /* The engine's request (h2o_req_t), for the calls below. */
    void *engine_request;
} counter_h2o_request;

/* An answer; the engine copies what it keeps. A header named "Connection" with the value
   "close" closes an HTTP/1 connection after the answer and is not sent over HTTP/2. */
typedef struct counter_h2o_response {
    int status;
    const char *content_type;
    size_t content_type_length;
    const char *const *header_names;
    const size_t *header_name_lengths;
    const char *const *header_values;
    const size_t *header_value_lengths;
    size_t header_count;
    const uint8_t *body;
    size_t body_length;
} counter_h2o_response;

/* An answer the engine itself made (a body over the limit, a transfer coding it does not
   know, ...), offered to the application to answer in its own format instead. */
typedef struct counter_h2o_refusal {
    int status;
    /* The engine's reason, as text. */
    const char *message;
    size_t message_length;
    void *engine_request;
} counter_h2o_refusal;

typedef struct counter_h2o_callbacks {
    /* A whole request arrived (on the loop thread): answer it with counter_h2o_respond now,
       or suspend it with counter_h2o_suspend and answer it later with counter_h2o_answer. */
    void (*request)(void *context, counter_h2o_request *request);
    /* The engine answers a request itself: call counter_h2o_refuse to answer instead. */
    void (*refusal)(void *context, counter_h2o_refusal *refusal);
    /* The request of an answer given with counter_h2o_answer is done with: its answer sent,
       or its connection or stream gone. Called once per such answer, on the loop thread. */
    void (*answer_done)(void *context);
    /* counter_h2o_stop_listening's work is done (on the loop thread). */
    void (*stopped_listening)(void *context);
    /* counter_h2o_run has set the engine up: from here on it accepts connections, and
       messages (answers, stop) may be sent. */
    void (*started)(void *context);
} counter_h2o_callbacks;

typedef struct counter_h2o_configuration {
    /* A bound, listening socket for cleartext: HTTP/1.1, and HTTP/2 to clients that open with
       its preface (prior knowledge). The server owns it from here on. */
    int listening_socket;
    /* A bound, listening socket for TLS (HTTP/2 or HTTP/1.1 by ALPN), or -1 for none. */
    int tls_listening_socket;
    size_t maximum_connections;
    uint64_t idle_timeout_milliseconds;
    size_t maximum_body_bytes;
    /* Streams an HTTP/2 connection may have open at once. */
    size_t maximum_streams_per_connection;
    /* PEM files for the TLS socket's certificate chain and key. */
    const char *tls_certificate_file;
    const char *tls_key_file;
} counter_h2o_configuration;

/* Makes a server (nothing is set up or runs until counter_h2o_run). NULL with `error` (static
   text) set when TLS cannot be set up; the sockets are then still the caller's. */
counter_h2o_server *counter_h2o_create(const counter_h2o_configuration *configuration,
                                       counter_h2o_callbacks callbacks, void *context, const char **error);
/* Sets the engine up and runs its event loop on the calling thread (callbacks.started once set
   up) until counter_h2o_shut_down's work is done; then frees what it set up. */
void counter_h2o_run(counter_h2o_server *server);
/* From any thread: stop accepting (the listening socket is closed), ask HTTP/1 connections to
   close after their next answer and HTTP/2 connections to take no new stream (GOAWAY).
   callbacks.stopped_listening is called when done. */
void counter_h2o_stop_listening(counter_h2o_server *server);
/* From any thread: close every connection and end counter_h2o_run (within a second: a
   connection that will not close by then is left to the process's end). */
void counter_h2o_shut_down(counter_h2o_server *server);
/* After counter_h2o_run returned, or if it never ran: frees the server. */
void counter_h2o_destroy(counter_h2o_server *server);

/* In the request callback: answers at once. */
void counter_h2o_respond(counter_h2o_request *request, const counter_h2o_response *response);
/* In the request callback: the request waits for counter_h2o_answer, which must follow exactly
   once, even if the client has gone meanwhile. */
counter_h2o_pending *counter_h2o_suspend(counter_h2o_server *server, counter_h2o_request *request);
/* From any thread: answers a suspended request (nothing is sent if its client has gone).
   Answers given between two turns of the loop are sent in the same turn. */
void counter_h2o_answer(counter_h2o_server *server, counter_h2o_pending *pending, const counter_h2o_response *response);
/* In the refusal callback: the application's answer instead of the engine's. */
void counter_h2o_refuse(counter_h2o_refusal *refusal, const counter_h2o_response *response);

/* In the request callback: the value of the header named `lower_case_name`, or NULL. */
const char *counter_h2o_header(counter_h2o_request *request, const char *lower_case_name, size_t name_length,
                               size_t *value_length);

/* Open connections (read on any thread: a snapshot). */
size_t counter_h2o_connection_count(counter_h2o_server *server);

#endif
