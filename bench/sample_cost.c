/* The cost of one timer-driven sample on this machine, without pathscope (bench/benchmarks.md).
 *
 *   sample_cost HZ MODE       MODE 0: no timer; 1: perf task-clock event delivering a signal
 *                             (what pathscope uses); 2: POSIX thread-CPU-time timer (pathscope's
 *                             fallback; the kernel runs it at its tick rate); 3: POSIX
 *                             CLOCK_MONOTONIC timer (PATHSCOPE_SAMPLE_CLOCK=wall); 4: as 1, but the
 *                             event is kept alive by a one-page mapping and its descriptor closed
 *                             (what pathscope does since issue 10: no descriptor to lose)
 *
 * Runs a fixed loop of 4e8 additions with an empty signal handler and prints its time and the
 * number of signals; (time - time of MODE 0) / signals is the cost of one sample's interrupt
 * and signal delivery (cpu_seconds, the process's CPU time, is the steadier measure on a loaded
 * machine).  `perf record -e cpu-clock -F HZ ./sample_cost HZ 0` gives the cost of
 * perf's own in-kernel sampling (no signal) for comparison.
 * Build: gcc -O1 -o sample_cost bench/sample_cost.c */
#define _GNU_SOURCE
#include <signal.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <linux/perf_event.h>
static volatile long n;
static void h(int s, siginfo_t*si, void*uc){n++;}
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static double cpu(){struct timespec t;clock_gettime(CLOCK_PROCESS_CPUTIME_ID,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){ int hz=atoi(argv[1]); int mode=atoi(argv[2]);
 struct sigaction sa={0}; sa.sa_sigaction=h; sa.sa_flags=SA_SIGINFO|SA_RESTART; sigaction(SIGPROF,&sa,0);
 if(mode==1||mode==4){ struct perf_event_attr a; memset(&a,0,sizeof a); a.size=sizeof a; a.type=PERF_TYPE_SOFTWARE; a.config=PERF_COUNT_SW_TASK_CLOCK;
 a.sample_period=1000000000/hz; a.disabled=1; a.exclude_kernel=1; a.wakeup_events=1;
 int fd=syscall(SYS_perf_event_open,&a,0,-1,-1,PERF_FLAG_FD_CLOEXEC);
 struct f_owner_ex o={F_OWNER_TID, syscall(SYS_gettid)}; fcntl(fd,F_SETOWN_EX,&o); fcntl(fd,F_SETSIG,SIGPROF); fcntl(fd,F_SETFL,O_ASYNC|O_NONBLOCK);
 ioctl(fd,PERF_EVENT_IOC_REFRESH,0); ioctl(fd,PERF_EVENT_IOC_ENABLE,0);
 if(mode==4){ if(mmap(0,sysconf(_SC_PAGESIZE),PROT_READ,MAP_SHARED,fd,0)==MAP_FAILED) return 1; close(fd);}}
 if(mode==2||mode==3){ struct sigevent ev={0}; ev.sigev_notify=SIGEV_THREAD_ID; ev.sigev_signo=SIGPROF; ev._sigev_un._tid=syscall(SYS_gettid);
 timer_t t; timer_create(mode==2?CLOCK_THREAD_CPUTIME_ID:CLOCK_MONOTONIC,&ev,&t);
 struct itimerspec its={{0,1000000000/hz},{0,1000000000/hz}}; timer_settime(t,0,&its,0);}
 double t0=now(), c0=cpu(); volatile double x=0; for(long i=0;i<400000000;i++) x+=i*0.5; double t1=now(), c1=cpu();
 printf("sample_cost mode=%d hz=%d seconds=%.4f cpu_seconds=%.4f signals=%ld\n", mode, hz, t1 - t0, c1 - c0, n); }
