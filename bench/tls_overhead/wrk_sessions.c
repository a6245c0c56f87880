// LD_PRELOAD'ed into wrk by bench/tls_overhead.sh MODE=newconn: counts the
// TLS handshakes wrk completes, full or resumed, and (unless
// WRK_SESSIONS_RESUME=1) makes every one a full handshake.
//
// Why: with `Connection: close` wrk reconnects for every request, but it
// keeps one SSL object per connection slot and reuses it after SSL_clear(),
// which keeps the last session: every reconnect offers that session's TLS 1.3
// ticket and the servers resume it (no certificate, no signature). Dropping
// the session before a handshake starts is what a client without a session
// cache does. The counts, written at exit to $WRK_SESSIONS_OUT as
// "full=N resumed=M", are what the script checks and reports.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct ssl_st SSL;
typedef struct ssl_session_st SSL_SESSION;
int SSL_in_before(const SSL* s);
int SSL_session_reused(const SSL* s);
int SSL_set_session(SSL* s, SSL_SESSION* session);

static unsigned long full_handshakes, resumed_handshakes;

int SSL_connect(SSL* s) {
  static int (*real_connect)(SSL*);
  static int resume = -1;
  if (!real_connect) real_connect = (int (*)(SSL*))dlsym(RTLD_NEXT, "SSL_connect");
  if (resume < 0) {
    const char* r = getenv("WRK_SESSIONS_RESUME");
    resume = r && r[0] == '1';
  }
  // Only before a handshake starts: wrk calls SSL_connect again and again
  // on a non-blocking socket until the handshake is done.
  if (!resume && SSL_in_before(s)) SSL_set_session(s, NULL);
  const int rc = real_connect(s);
  if (rc == 1) {
    if (SSL_session_reused(s))
      ++resumed_handshakes;
    else
      ++full_handshakes;
  }
  return rc;
}

__attribute__((destructor)) static void write_counts(void) {
  const char* path = getenv("WRK_SESSIONS_OUT");
  if (!path) return;
  FILE* f = fopen(path, "w");
  if (!f) return;
  fprintf(f, "full=%lu resumed=%lu\n", full_handshakes, resumed_handshakes);
  fclose(f);
}
