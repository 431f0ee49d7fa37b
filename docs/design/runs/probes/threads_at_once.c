/*
 * threads_at_once.c -- docs/design/runs/2026-12-08-threads-sharing-a-pool.md: T threads at once
 * making roots of budget `budget` (1 here) on pools of their own (width 1) or on one shared
 * pool (width 2): a tt_fork of 2 jobs (kind 0), tt_for_ranges over 100 indices (1) or a
 * team scope of one section (2), 10^6 calls a round; prints each thread's ns per call.
 *
 *   gcc -O2 -fopenmp -Ibuild/include -Iinclude threads_at_once.c \
 *       build/lib/.libs/libthreadteam.a -o threads_at_once -lpthread -ldl
 *   ./threads_at_once T KIND [shared]
 */
#define _GNU_SOURCE
#include <threadteam.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static __thread volatile unsigned sink;
static void job(void *a, unsigned i, tt_exec *c){(void)a;(void)c; sink+=i;}
static void body(void *a, size_t b, size_t e){(void)a; sink+=(unsigned)(e-b);}
static void sec(void *a, tt_section *s){(void)a; sink+=tt_section_rank(s);}
static void scope(void *a, tt_scope *s){(void)a; if(tt_scope_run(s,sec,NULL)) exit(5);}
static unsigned long long now(void){struct timespec t; clock_gettime(CLOCK_MONOTONIC,&t); return t.tv_sec*1000000000ull+t.tv_nsec;}
static long n = 1000000; static int kind; static unsigned width=1, budget=1; static int shared_pool; static tt_pool *sp;
static pthread_barrier_t bar;
static void *run(void *arg){
  tt_pool *p = sp;
  if (!shared_pool) { tt_pool_attr *a; tt_pool_attr_create(&a); tt_pool_attr_set_threads(a,width); tt_pool_attr_set_isolate_shares(a,0); if(tt_pool_create(&p,a)) exit(1); }
  double *out = arg;
  for (int r=0;r<3;r++){
    pthread_barrier_wait(&bar);
    unsigned long long t0=now();
    for(long k=0;k<n;k++){ tt_exec ex; if(tt_exec_init(&ex,p,budget)) exit(2);
      int rc = kind==0 ? tt_fork(&ex,2,job,NULL) : kind==1 ? tt_for_ranges(&ex,100,1,body,NULL) : tt_team_scope(&ex,scope,NULL);
      if(rc) exit(3);}
    out[r]=(now()-t0)/(double)n;
  }
  if (!shared_pool) tt_pool_destroy(p); return NULL;}
int main(int argc,char**argv){
  int T = atoi(argv[1]); kind = atoi(argv[2]); shared_pool = argc>3 && !strcmp(argv[3],"shared");
  if (shared_pool) { tt_pool_attr *a; tt_pool_attr_create(&a); tt_pool_attr_set_threads(a,2); tt_pool_attr_set_isolate_shares(a,0); if(tt_pool_create(&sp,a)) return 1; }
  pthread_barrier_init(&bar,NULL,T);
  pthread_t th[8]; double out[8][3];
  for(int i=0;i<T;i++) pthread_create(&th[i],NULL,run,out[i]);
  for(int i=0;i<T;i++) pthread_join(th[i],NULL);
  printf("T=%d kind=%d%s:", T, kind, shared_pool?" shared":""); for(int i=0;i<T;i++) printf(" %.1f", out[i][2]); printf(" ns/call\n");
  return 0;}
