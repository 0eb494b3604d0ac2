// kprof: a CUDA injection library that sums the device time of every kernel
// a process runs, per kernel name and launch shape, through CUPTI's activity
// API. The driver loads it at cuInit when CUDA_INJECTION64_PATH names it, so
// it profiles any binary (our pure-Go one included) without rebuilding it;
// scripts/kprof/run.sh builds and runs it where nsys is not installed.
//
// The table goes to $KPROF_OUT (default kprof.txt), rewritten after every
// CUPTI buffer it receives: a Go program leaves through exit_group, so no
// atexit handler would run, and CUPTI hands over a buffer only when it is
// full or flushed. A thread of ours therefore flushes every 200 ms, so only
// the last fraction of a second of a run can be missing from the table.
//
// KREC is the kernel record type of the CUPTI headers at hand
// (CUpti_ActivityKernel9, 10, ...); run.sh passes the newest it finds.
#include <cupti.h>
#include <pthread.h>
#include <time.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef KREC
#define KREC CUpti_ActivityKernel9
#endif

#define BUF_BYTES (4u << 20)
#define MAX_ENTS 8192

typedef struct {
  char key[320];
  unsigned long long ns, calls;
} ent;

static ent ents[MAX_ENTS];
static int nents;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; // ents: CUPTI's thread and the flusher both deliver buffers

static void add(const char* name, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned long long ns) {
  char key[320];
  snprintf(key, sizeof key, "%.240s grid(%u,%u,%u) block %u", name, gx, gy, gz, bx);
  for (int i = 0; i < nents; i++)
    if (strcmp(ents[i].key, key) == 0) {
      ents[i].ns += ns;
      ents[i].calls++;
      return;
    }
  if (nents == MAX_ENTS) return;
  strcpy(ents[nents].key, key);
  ents[nents].ns = ns;
  ents[nents].calls = 1;
  nents++;
}

static int byTime(const void* a, const void* b) {
  const ent *x = a, *y = b;
  return x->ns < y->ns ? 1 : x->ns > y->ns ? -1 : 0;
}

static void dump(void) {
  const char* path = getenv("KPROF_OUT");
  FILE* f = fopen(path ? path : "kprof.txt", "w");
  if (!f) return;
  ent* s = malloc(sizeof(ent) * (nents ? nents : 1));
  memcpy(s, ents, sizeof(ent) * nents);
  qsort(s, nents, sizeof(ent), byTime);
  unsigned long long tot = 0, calls = 0;
  for (int i = 0; i < nents; i++) tot += s[i].ns, calls += s[i].calls;
  fprintf(f, "total %.3f ms of kernel time, %llu kernels\n", tot / 1e6, calls);
  fprintf(f, "%12s %9s %9s %6s  %s\n", "total_us", "calls", "us_each", "share", "kernel");
  for (int i = 0; i < nents; i++)
    fprintf(f, "%12.1f %9llu %9.2f %5.1f%%  %s\n", s[i].ns / 1e3, s[i].calls, s[i].ns / 1e3 / s[i].calls,
            100.0 * s[i].ns / (tot ? tot : 1), s[i].key);
  free(s);
  fclose(f);
}

static void CUPTIAPI bufRequested(uint8_t** buf, size_t* size, size_t* maxRecords) {
  *buf = aligned_alloc(8, BUF_BYTES);
  *size = *buf ? BUF_BYTES : 0;
  *maxRecords = 0;
}

static void CUPTIAPI bufCompleted(CUcontext ctx, uint32_t stream, uint8_t* buf, size_t size, size_t valid) {
  (void)ctx, (void)stream, (void)size;
  CUpti_Activity* r = NULL;
  pthread_mutex_lock(&mu);
  while (cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) {
    if (r->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && r->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
    const KREC* k = (const KREC*)r;
    add(k->name ? k->name : "?", k->gridX, k->gridY, k->gridZ, k->blockX, k->end - k->start);
  }
  free(buf);
  dump();
  pthread_mutex_unlock(&mu);
}

static void* flusher(void* arg) {
  (void)arg;
  const struct timespec d = {0, 200 * 1000 * 1000};
  for (;;) {
    nanosleep(&d, NULL);
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  }
  return NULL;
}

int InitializeInjection(void) {
  if (cuptiActivityRegisterCallbacks(bufRequested, bufCompleted) != CUPTI_SUCCESS) return 0;
  if (cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) return 0;
  pthread_t th;
  pthread_create(&th, NULL, flusher, NULL);
  pthread_detach(th);
  return 1;
}
