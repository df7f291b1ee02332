/* Linux event APIs the Glibc module leaves out: epoll, for the bench's event loop. */
#include <sys/epoll.h>
