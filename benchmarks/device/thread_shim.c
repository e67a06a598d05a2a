/* LD_PRELOAD shim: every pthread_create prints the Python stack that asked for it (and the
 * native one), so a template's stray thread (issue 36: a CUDA driver thread after the
 * TileLang and tvm-builder templates' initializers) names the Python call behind it.
 *   gcc -shared -fPIC -O1 -o /tmp/thread_shim.so benchmarks/device/thread_shim.c -ldl
 *   LD_PRELOAD=/tmp/thread_shim.so python3 benchmarks/device/template_threads.py tilelang
 * Python's C API is looked up at run time (the interpreter exports it), so the shim links
 * against nothing but libc and libdl. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

typedef int (*create_t)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
typedef int (*flag_t)(void);
typedef void (*release_t)(int);
typedef int (*run_t)(const char *);

static __thread int inside;

int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *),
                   void *arg) {
  static create_t real;
  if (!real) real = (create_t)dlsym(RTLD_NEXT, "pthread_create");
  if (!inside) {
    inside = 1;
    flag_t initialized = (flag_t)dlsym(RTLD_DEFAULT, "Py_IsInitialized");
    flag_t ensure = (flag_t)dlsym(RTLD_DEFAULT, "PyGILState_Ensure");
    release_t release = (release_t)dlsym(RTLD_DEFAULT, "PyGILState_Release");
    run_t run = (run_t)dlsym(RTLD_DEFAULT, "PyRun_SimpleString");
    fprintf(stderr, "THREAD_SHIM: pthread_create in pid %d; native stack:\n", getpid());
    void *frames[24];
    int depth = backtrace(frames, 24);
    backtrace_symbols_fd(frames, depth, 2);
    if (initialized && ensure && release && run && initialized()) {
      int state = ensure();
      run("import sys, traceback\n"
          "sys.stderr.write('THREAD_SHIM: Python stack:\\n')\n"
          "traceback.print_stack(file=sys.stderr)\n");
      release(state);
    }
    fprintf(stderr, "THREAD_SHIM: end\n");
    inside = 0;
  }
  return real(thread, attr, start, arg);
}
