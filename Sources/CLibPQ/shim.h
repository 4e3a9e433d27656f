#ifndef LATCHKEY_CLIBPQ_SHIM_H
#define LATCHKEY_CLIBPQ_SHIM_H
#include <libpq-fe.h>
#include <poll.h>
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
#endif
