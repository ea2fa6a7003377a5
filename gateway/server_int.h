/*
 * Inside the gateway's HTTP server: its state, shared by the request
 * handler and the fetch path (server.c) and by start, reload, stop and the
 * audit head thread (start.c). Not for use outside those two files.
 */
#ifndef RG_GATEWAY_SERVER_INT_H
#define RG_GATEWAY_SERVER_INT_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>

#include "gateway/admin.h"
#include "gateway/conns.h"
#include "gateway/context.h"
#include "gateway/control.h"
#include "gateway/http.h"
#include "gateway/lease.h"
#include "gateway/published.h"
#include "gateway/server.h"
#include "gateway/snapshot.h"
#include "gateway/spool.h"

struct gateway_server {
    gateway_ctx ctx;
    gateway_http_listener *http; /* the push listener; its URL is in <state_dir>/url */
    gateway_conns *conns;
    gateway_spool *spool;
    gateway_control *control; /* the local control socket (refgate run) */
    gateway_admin *admin;     /* /healthz and /metrics, when config has "admin" */
    /* The config at start (the caller's; what control and the admin
     * listener read), and the one new requests begin under (under lock). */
    gateway_snapshot *base;
    gateway_snapshot *current;
    /*
     * With a database: the published policy merged over the host's own
     * config is what requests begin under (gateway/published.h). Under
     * policy_mu, which a reload and a new policy both hold throughout, so
     * neither installs a snapshot made of what the other replaced.
     */
    gateway_published *published;
    pthread_mutex_t policy_mu;
    const config_model *local; /* the host's config: the one at start or the last reload */
    config_model *local_owned; /* the last reload's, freed with the server */
    json_t *policy;            /* the policy in force; NULL: none yet, every push refused */
    long long policy_version;
    char policy_digest[CONFIG_POLICY_DIGEST_SIZE];
    const char *refusal; /* while there is none: why, for every push's ng */
    atomic_int stopping; /* ctx.stopping points here */
    pthread_mutex_t lock;
    unsigned active;   /* requests with a body in flight */
    int curl_ready;    /* curl_global_init succeeded */
    int audit_started; /* the start event is in the log: a stop event follows */

    gateway_lease *lease; /* this gateway's lease in the database (ctx.db set) */
    int dir_lock_fd;      /* the state_dir lock when the audit log is in the database */
    /* The thread that logs the audit head every AUDIT_HEAD_SECONDS. */
    pthread_t head_thread;
    int head_thread_running;
    int head_stop;
    pthread_mutex_t head_mu;
    pthread_cond_t head_cv;
};

/* The libmicrohttpd callbacks of the push listener (server.c); their
 * closure is the server. */
enum MHD_Result gateway_server_handle(void *cls, struct MHD_Connection *c, const char *url,
                                      const char *method, const char *version,
                                      const char *upload_data, size_t *upload_data_size,
                                      void **con_cls);
void gateway_server_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                              enum MHD_RequestTerminationCode toe);
void gateway_server_connection_event(void *cls, struct MHD_Connection *c, void **socket_context,
                                     enum MHD_ConnectionNotificationCode code);

#endif
