/*
 * netproxy_limits.h - every bound of the egress proxy (cellblock-proxy) and of
 * the launcher code that starts it, in one place.
 *
 * The proxy is trusted code facing the sandbox: each of these caps what a
 * hostile sandbox can make it hold (fds, memory, time) or do (bytes sent to
 * the allowed hosts).  docs/SECURITY.md "Network by allowlist" lists them.
 */
#ifndef CB_LAUNCHER_NETPROXY_LIMITS_H
#define CB_LAUNCHER_NETPROXY_LIMITS_H

/* ---- where the sandbox finds it --------------------------------------- */
#define CB_PROXY_PORT        3128                              /* 127.0.0.1 and ::1 inside */
#define CB_PROXY_SOCK_DIR    "/run/cellblock"                  /* tmpfs inside the sandbox */
#define CB_PROXY_SOCK_PATH   "/run/cellblock/proxy.sock"       /* unix socket inside */
#define CB_PROXY_URL         "http://127.0.0.1:3128"           /* HTTP(S)_PROXY in the sandbox */
#define CB_PROXY_NO_PROXY    "localhost,127.0.0.1,::1"         /* NO_PROXY in the sandbox */
#define CB_PROXY_BACKLOG     128                               /* listen(2) backlog */
#define CB_PROXY_LISTENERS   3                                 /* v4, v6, unix */
#define CB_PROXY_SOCKDIR_OPT "mode=0755,size=16k,nr_inodes=16" /* that tmpfs */

/* ---- the allowlist ------------------------------------------------------ */
#define CB_PROXY_RULES_MAX    64   /* HOST[:PORT] entries of --network allow: */
#define CB_PROXY_PINS_MAX     32   /* --network-resolve entries */
#define CB_PROXY_NAME_MAX     253  /* a DNS name (RFC 1035) */
#define CB_PROXY_LABEL_MAX    63   /* one label of it */
#define CB_PROXY_SPEC_MAX     4096 /* bytes of the whole allow: spec */
#define CB_PROXY_ADDRS_MAX    8    /* addresses of one name tried */
#define CB_PROXY_FORWARDS_MAX 16   /* loopback address:port pairs listened on inside */

/* ---- defaults of the per-session bounds (flags can change them) -------- */
#define CB_PROXY_DEFAULT_MAX_CONNS  64         /* concurrent connections */
#define CB_PROXY_MAX_CONNS_LIMIT    1024       /* --network-max-conns upper bound */
#define CB_PROXY_DEFAULT_MAX_TOTAL  65536      /* connections per session */
#define CB_PROXY_DEFAULT_MAX_MB     2048       /* bytes relayed per session, MiB */
#define CB_PROXY_MAX_MB_LIMIT       (1L << 20) /* --network-max-bytes upper bound, MiB */
#define CB_PROXY_MAX_TOTAL_LIMIT    (1L << 30) /* cellblock-proxy --max-total upper bound */
#define CB_PROXY_HEAD_TIMEOUT_MS    15000      /* a whole request head must arrive */
#define CB_PROXY_RESOLVE_TIMEOUT_MS 15000      /* name resolution, all tries */
#define CB_PROXY_CONNECT_TIMEOUT_MS 10000      /* one connect(2) to the upstream */
#define CB_PROXY_IDLE_TIMEOUT_MS    120000     /* a tunnel with no byte either way */
#define CB_PROXY_TIMEOUT_S_LIMIT    86400      /* upper bound of the timeout flags */
#define CB_PROXY_LINGER_MS          1000       /* after an error reply: drain, then close */

/* ---- per connection ---------------------------------------------------- */
#define CB_PROXY_HEAD_MAX       16384 /* request line + headers */
#define CB_PROXY_HEADERS_MAX    100   /* header lines */
#define CB_PROXY_METHOD_MAX     16    /* bytes of a method */
#define CB_PROXY_BUF            65536 /* relay buffer, each direction */
#define CB_PROXY_FWD_EXTRA      512   /* what a forwarded head may add */
#define CB_PROXY_REPLY_MAX      1024  /* an error reply the proxy writes */
#define CB_PROXY_REASON_MAX     300   /* its reason phrase */
#define CB_PROXY_ACCEPT_BATCH   16    /* accept(2) calls per wake-up */
#define CB_PROXY_IO_ROUNDS      4     /* read/write rounds per wake-up per conn */
#define CB_PROXY_CHUNK_LINE_MAX 1024  /* a chunk-size line (with extension) or trailer line */
#define CB_PROXY_CHUNK_HEX_MAX  15    /* hex digits of a chunk size (< 2^60) */
#define CB_PROXY_CL_DIGITS_MAX  18    /* digits of a Content-Length (< 10^18) */

/* ---- secrets and TLS termination (--secret NAME@HOST,...) -------------- */
#define CB_PROXY_SECRETS_MAX        16            /* --secret flags */
#define CB_PROXY_SECRET_HOSTS_MAX   8             /* hosts one secret is bound to */
#define CB_PROXY_SECRET_NAME_MAX    64            /* bytes of its variable name */
#define CB_PROXY_SECRET_VALUE_MAX   4096          /* bytes of its value */
#define CB_PROXY_PLACEHOLDER_PREFIX "cb-secret-"  /* what the sandbox holds instead... */
#define CB_PROXY_PLACEHOLDER_HEX    32            /* ...followed by this many random hex digits */
#define CB_PROXY_SECRETS_BYTES_MAX  (128 * 1024)  /* the table as the launcher sends it */
#define CB_PROXY_BOUND_HOSTS_MAX    32            /* distinct hosts with secrets (leaf certs) */
#define CB_PROXY_HOUT_MAX           (32 * 1024)   /* a forwarded head with values put in */
#define CB_PROXY_HANDSHAKES_MAX     16            /* TLS handshakes in flight */
#define CB_PROXY_TLS_TIMEOUT_MS     10000         /* one TLS handshake */
#define CB_PROXY_HOSTS_MAX          64            /* hosts whose costs are counted apart */
#define CB_PROXY_CTL_MAX            (32 * 1024)   /* a control message, either way */
#define CB_PROXY_CTL_MS             2000          /* the launcher waits this long for a reply */
#define CB_PROXY_CA_DAYS            30            /* the session CA's and leaves' validity */
#define CB_PROXY_CA_PEM_MAX         8192          /* the session CA certificate, PEM */
#define CB_PROXY_BUNDLE_MAX         (4096 * 1024) /* the sandbox's CA bundle copy */
#define CB_PROXY_CA_DIR             "/etc/cellblock-ca"                /* in the sandbox */
#define CB_PROXY_CA_BUNDLE          "/etc/cellblock-ca/bundle.pem"     /* system + session CA */
#define CB_PROXY_CA_SESSION         "/etc/cellblock-ca/session-ca.pem" /* the session CA alone */

/* ---- the process ------------------------------------------------------- */
#define CB_PROXY_LOG_BURST      200               /* log lines before rate limiting */
#define CB_PROXY_LOG_PER_S      20                /* then this many per second */
#define CB_PROXY_DNS_TIMEOUT_MS 2000              /* c-ares: one try */
#define CB_PROXY_DNS_TRIES      2                 /* c-ares: tries per server */
#define CB_PROXY_FD_SLACK       64                /* RLIMIT_NOFILE = 2 * conns + this */
#define CB_PROXY_AS_MB          512               /* RLIMIT_AS of the proxy (not under ASan) */
#define CB_PROXY_ARGS_MAX       128               /* argv entries the launcher builds */
#define CB_PROXY_READY_MS       10000             /* the launcher waits this long for "ready" */
#define CB_PROXY_RESTARTS_MAX   3                 /* crashes before the launcher gives up */
#define CB_PROXY_UID            65534             /* its ids when the launcher is root */
#define CB_PROXY_ERR_MAX        512               /* a setup error it reports */
#define CB_PROXY_FD_ARG_MAX     65535             /* the highest fd its flags may name */
#define CB_PROXY_BIN            "cellblock-proxy" /* next to the launcher */

#endif
