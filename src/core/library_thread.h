/* The threads uroce starts in a program's process (library_thread.c). */
#ifndef URO_LIBRARY_THREAD_H
#define URO_LIBRARY_THREAD_H

#include <pthread.h>

/* pthread_create(3), the new thread blocking every signal a program may
 * direct at its process: 0 or an errno. */
int uro_thread_start(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg);

#endif
