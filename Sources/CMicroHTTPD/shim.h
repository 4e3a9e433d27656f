#ifndef LATCHKEY_CMICROHTTPD_SHIM_H
#define LATCHKEY_CMICROHTTPD_SHIM_H
#include <stdint.h>
#include <stddef.h>
#include <stdarg.h>
#include <string.h>
#include <sys/types.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <microhttpd.h>

// Swift cannot call C variadic functions (MHD_start_daemon, MHD_get_daemon_info,
// MHD_get_connection_info); these static inline wrappers give them fixed signatures.

/// Daemon settings; zero means "libmicrohttpd's default" for every numeric field.
typedef struct latchkey_mhd_config {
    /// Numeric IPv4 or IPv6 address to bind, or NULL / "" for every IPv4 address.
    const char *host;
    uint16_t port;
    unsigned int thread_pool_size;
    unsigned int connection_timeout_seconds;
    unsigned int connection_limit;
    /// Simultaneous connections from one client IP address (MHD_OPTION_PER_IP_CONNECTION_LIMIT).
    unsigned int per_ip_connection_limit;
    size_t connection_memory_limit;
    int reuse_port;
    /// MHD_ALLOW_SUSPEND_RESUME: the application answers on threads of its own.
    int allow_suspend_resume;
    /// No thread of libmicrohttpd's own: the application's event loop waits on the daemon's epoll
    /// descriptor (`latchkey_mhd_epoll_fd`) and calls MHD_run when it is readable.
    int external_polling;
} latchkey_mhd_config;

/// Error codes written by latchkey_mhd_start when it returns NULL.
enum {
    LATCHKEY_MHD_OK = 0,
    LATCHKEY_MHD_BAD_HOST = 1,
    LATCHKEY_MHD_START_FAILED = 2,
};

/// Leaves URIs and query arguments exactly as sent: the Swift side percent-decodes them itself,
/// so that an encoded "/" inside one path segment ("%2F") does not split the segment.
static size_t latchkey_mhd_keep_escapes(void *cls, struct MHD_Connection *connection, char *s) {
    (void)cls;
    (void)connection;
    return strlen(s);
}

static inline struct MHD_Daemon *latchkey_mhd_start(const latchkey_mhd_config *config,
                                                    MHD_AccessHandlerCallback handler,
                                                    void *handler_cls,
                                                    MHD_RequestCompletedCallback completed,
                                                    void *completed_cls,
                                                    int *error) {
    struct sockaddr_in v4;
    struct sockaddr_in6 v6;
    void *address = NULL;
    unsigned int flags = config->external_polling ? 0 : MHD_USE_INTERNAL_POLLING_THREAD;
    memset(&v4, 0, sizeof v4);
    memset(&v6, 0, sizeof v6);
    *error = LATCHKEY_MHD_OK;

    if (config->host == NULL || config->host[0] == '\0') {
        v4.sin_family = AF_INET;
        v4.sin_port = htons(config->port);
        v4.sin_addr.s_addr = htonl(INADDR_ANY);
        address = &v4;
    } else if (inet_pton(AF_INET, config->host, &v4.sin_addr) == 1) {
        v4.sin_family = AF_INET;
        v4.sin_port = htons(config->port);
        address = &v4;
    } else if (inet_pton(AF_INET6, config->host, &v6.sin6_addr) == 1) {
        v6.sin6_family = AF_INET6;
        v6.sin6_port = htons(config->port);
        address = &v6;
        flags |= MHD_USE_IPv6;
    } else {
        *error = LATCHKEY_MHD_BAD_HOST;
        return NULL;
    }
    if (MHD_is_feature_supported(MHD_FEATURE_EPOLL) == MHD_YES) {
        flags |= MHD_USE_EPOLL;
    }
    if (config->allow_suspend_resume) {
        flags |= MHD_ALLOW_SUSPEND_RESUME;
    }

    struct MHD_OptionItem options[12];
    size_t n = 0;
    options[n++] = (struct MHD_OptionItem){ MHD_OPTION_SOCK_ADDR, 0, address };
    options[n++] = (struct MHD_OptionItem){ MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)completed, completed_cls };
    options[n++] = (struct MHD_OptionItem){ MHD_OPTION_UNESCAPE_CALLBACK, (intptr_t)latchkey_mhd_keep_escapes, NULL };
    if (config->thread_pool_size > 1) {
        options[n++] = (struct MHD_OptionItem){ MHD_OPTION_THREAD_POOL_SIZE, (intptr_t)config->thread_pool_size, NULL };
    }
    if (config->connection_timeout_seconds > 0) {
        options[n++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)config->connection_timeout_seconds, NULL };
    }
    if (config->connection_limit > 0) {
        options[n++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_LIMIT, (intptr_t)config->connection_limit, NULL };
    }
    if (config->per_ip_connection_limit > 0) {
        options[n++] = (struct MHD_OptionItem){ MHD_OPTION_PER_IP_CONNECTION_LIMIT, (intptr_t)config->per_ip_connection_limit, NULL };
    }
    if (config->connection_memory_limit > 0) {
        options[n++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_MEMORY_LIMIT, (intptr_t)config->connection_memory_limit, NULL };
    }
    if (config->reuse_port) {
        options[n++] = (struct MHD_OptionItem){ MHD_OPTION_LISTENING_ADDRESS_REUSE, 1, NULL };
    }
    options[n++] = (struct MHD_OptionItem){ MHD_OPTION_END, 0, NULL };

    struct MHD_Daemon *daemon = MHD_start_daemon(flags, config->port, NULL, NULL, handler, handler_cls,
                                                 MHD_OPTION_ARRAY, options, MHD_OPTION_END);
    if (daemon == NULL) {
        *error = LATCHKEY_MHD_START_FAILED;
    }
    return daemon;
}

/// The epoll descriptor of a daemon started with `external_polling`, or -1.
static inline int latchkey_mhd_epoll_fd(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_EPOLL_FD);
    return info == NULL ? -1 : info->epoll_fd;
}

/// Milliseconds until the daemon has a timeout to act on (an idle connection to close), at most a
/// minute; -1 when it has none.
static inline int latchkey_mhd_timeout_ms(struct MHD_Daemon *daemon) {
    MHD_UNSIGNED_LONG_LONG timeout = 0;
    if (MHD_get_timeout(daemon, &timeout) != MHD_YES) return -1;
    return timeout > 60000 ? 60000 : (int)timeout;
}

/// The port the daemon listens on (useful after binding port 0), or 0 if unknown.
static inline uint16_t latchkey_mhd_bound_port(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info == NULL ? 0 : info->port;
}

/// Connections currently open (summed over the thread pool by libmicrohttpd).
static inline unsigned int latchkey_mhd_connection_count(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
    return info == NULL ? 0 : info->num_connections;
}

/// Writes the peer's numeric address into `buffer`; returns 0 on success, -1 otherwise.
static inline int latchkey_mhd_client_address(struct MHD_Connection *connection, char *buffer, size_t length) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (info == NULL || info->client_addr == NULL) {
        return -1;
    }
    const struct sockaddr *address = info->client_addr;
    const void *raw;
    if (address->sa_family == AF_INET) {
        raw = &((const struct sockaddr_in *)address)->sin_addr;
    } else if (address->sa_family == AF_INET6) {
        raw = &((const struct sockaddr_in6 *)address)->sin6_addr;
    } else {
        return -1;
    }
    return inet_ntop(address->sa_family, raw, buffer, (socklen_t)length) == NULL ? -1 : 0;
}

#endif
