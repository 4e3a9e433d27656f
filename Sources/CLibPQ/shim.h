#ifndef LATCHKEY_CLIBPQ_SHIM_H
#define LATCHKEY_CLIBPQ_SHIM_H
#include <libpq-fe.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* PG_DIAG_* are character-literal macros, which Swift does not import. */
static inline const char *lk_result_sqlstate(const PGresult *res) {
    return PQresultErrorField(res, PG_DIAG_SQLSTATE);
}
static inline const char *lk_result_primary_message(const PGresult *res) {
    return PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);
}
static inline const char *lk_result_detail(const PGresult *res) {
    return PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);
}
static inline const char *lk_result_constraint(const PGresult *res) {
    return PQresultErrorField(res, PG_DIAG_CONSTRAINT_NAME);
}

/* Notices (including an ERROR/FATAL the server sends to an idle connection just before closing it,
   e.g. 57P01 after pg_terminate_backend or a fast shutdown) go here instead of stderr. A FATAL or
   PANIC sets *fatal_flag: the server is closing this connection even if EOF has not arrived yet. */
static void lk_notice_receiver(void *arg, const PGresult *res) {
    const char *severity = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
    if (arg != NULL && severity != NULL &&
        (strcmp(severity, "FATAL") == 0 || strcmp(severity, "PANIC") == 0)) {
        *(int *)arg = 1;
    }
}

static inline void lk_install_notice_receiver(PGconn *conn, int *fatal_flag) {
    PQsetNoticeReceiver(conn, lk_notice_receiver, fatal_flag);
}

/* Non-blocking liveness probe for an idle connection: reads and parses whatever the server sent
   (a FATAL "terminating connection" message, or EOF after a restart) without a round trip.
   Returns 1 when the connection still looks usable. */
static inline int lk_idle_connection_alive(PGconn *conn, const int *fatal_flag) {
    for (int i = 0; i < 8; i++) {
        if (PQstatus(conn) != CONNECTION_OK || *fatal_flag) return 0;
        int fd = PQsocket(conn);
        if (fd < 0) return 0;
        struct pollfd p = { .fd = fd, .events = POLLIN, .revents = 0 };
        int ready = poll(&p, 1, 0);
        if (ready < 0) return 0;
        if (ready == 0) return 1;             /* nothing pending: a healthy idle connection */
        if (p.revents & (POLLERR | POLLNVAL)) return 0;
        if (!PQconsumeInput(conn)) return 0;  /* EOF or read error */
        (void)PQisBusy(conn);                 /* parses the input: idle-state errors reach the receiver */
        PGnotify *n;
        while ((n = PQnotifies(conn)) != NULL) PQfreemem(n);
    }
    /* Still receiving after several reads: something unexpected; do not reuse it. */
    return 0;
}
/* A query that ran past its deadline is cancelled from a detached thread: PQcancel opens a new
   connection to the server and waits for it to close, which on a hung server (SIGSTOP, a partition)
   never happens. The caller drops its own connection at once and never waits for this thread. */
static void *lk_cancel_thread(void *arg) {
    char message[256];
    (void)PQcancel((PGcancel *)arg, message, (int)sizeof message);
    PQfreeCancel((PGcancel *)arg);
    return NULL;
}

/* Returns 1 when a cancel request was started. */
static inline int lk_cancel_in_background(PGconn *conn) {
    PGcancel *cancel = PQgetCancel(conn);
    if (cancel == NULL) return 0;
    pthread_attr_t attr;
    pthread_t thread;
    if (pthread_attr_init(&attr) != 0) { PQfreeCancel(cancel); return 0; }
    (void)pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    (void)pthread_attr_setstacksize(&attr, 64 * 1024);
    int started = pthread_create(&thread, &attr, lk_cancel_thread, cancel) == 0;
    pthread_attr_destroy(&attr);
    if (!started) PQfreeCancel(cancel);
    return started;
}

/* Waits until the connection's socket is readable or `timeout_ms` passes: 1 readable (or an error
   condition libpq will report), 0 timed out, -1 poll failed (EINTR is retried by the caller). */
static inline int lk_wait_readable(PGconn *conn, int timeout_ms) {
    int fd = PQsocket(conn);
    if (fd < 0) return 1;  /* let PQconsumeInput report the broken connection */
    struct pollfd p = { .fd = fd, .events = POLLIN, .revents = 0 };
    return poll(&p, 1, timeout_ms);
}
#endif
