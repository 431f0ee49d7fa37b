/*
 * external_threads.c -- docs/design/runs/2026-12-07-external-marks.md: T threads at once,
 * each with a pool of width 2 of its own, each calling tt_external with an empty callee on a
 * token of the full width, 10^6 calls a round, three rounds; prints each thread's ns per call.
 *
 *   gcc -O2 -fopenmp -Ibuild/include -Iinclude external_threads.c \
 *       build/lib/.libs/libthreadteam.a -o external_threads -lpthread -ldl
 *   ./external_threads 2
 */
#define _GNU_SOURCE
#include <threadteam.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
/* Per thread: a global that both threads write could share a cache line with
 * the library's own globals in this static link, and time that instead. */
static __thread volatile unsigned sink;
static void callee(void *a, unsigned w){(void)a; sink+=w;}
static unsigned long long now(void){struct timespec t; clock_gettime(CLOCK_MONOTONIC,&t); return t.tv_sec*1000000000ull+t.tv_nsec;}
static long n = 1000000;
static pthread_barrier_t bar;
static void *run(void *arg){
  tt_pool_attr *a; tt_pool_attr_create(&a); tt_pool_attr_set_threads(a,2);
  tt_pool *p; if(tt_pool_create(&p,a)) exit(1);
  double *out = arg;
  for (int r=0;r<3;r++){
    pthread_barrier_wait(&bar);
    unsigned long long t0=now();
    for(long k=0;k<n;k++){ tt_exec ex; if(tt_exec_init(&ex,p,2)) exit(2); if(tt_external(&ex,callee,NULL)) exit(3);}
    out[r]=(now()-t0)/(double)n;
  }
  tt_pool_destroy(p); return NULL;}
int main(int argc,char**argv){
  int T = argc>1? atoi(argv[1]) : 2;
  pthread_barrier_init(&bar,NULL,T);
  pthread_t th[8]; double out[8][3];
  for(int i=0;i<T;i++) pthread_create(&th[i],NULL,run,out[i]);
  for(int i=0;i<T;i++) pthread_join(th[i],NULL);
  for(int r=0;r<3;r++){ printf("round %d:", r); for(int i=0;i<T;i++) printf(" %.1f", out[i][r]); printf(" ns/external\n"); }
  return 0;}
