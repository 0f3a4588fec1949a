/*
 * probe_fallocate: fallocate(2) on a file of the node's directory returns and changes
 * what Linux does (docs/target-contract.md, "The disk").
 *
 *   probe_fallocate
 *
 * cmc answers it without reserving blocks (a world holds no preallocated zeros), so
 * what is checked is what a program can rely on: the size after mode 0 (grown only
 * past the end), after FALLOC_FL_KEEP_SIZE (unchanged), the bytes (old ones kept,
 * zeros after), the position (unmoved), a write past the reserved range, and the
 * errors in vfs_fallocate's order: EINVAL for a negative offset or a length of 0,
 * EBADF on a descriptor opened read-only, EFBIG when offset + length wraps, ESPIPE on
 * a pipe. Not checked: st_blocks and SEEK_HOLE, where cmc shows holes.
 */
#include "probe.h"

#include <stdint.h>

static long size_of(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 ? (long)st.st_size : -1;
}

int main(void)
{
    p_init();
    int fd = open("f", O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    OK("open f", fd);
    CHECK("write ab", write(fd, "ab", 2), 2);
    OK("fallocate 0..4096", fallocate(fd, 0, 0, 4096));
    CHECK("size after mode 0", size_of(fd), 4096);
    CHECK("position unmoved", lseek(fd, 0, SEEK_CUR), 2);
    char buf[4096], zeros[4096];
    memset(zeros, 0, sizeof zeros);
    CHECK("pread whole", pread(fd, buf, sizeof buf, 0), 4096);
    MEM("old bytes kept", buf, 2, "ab");
    CHECK("zeros after", memcmp(buf + 2, zeros, sizeof buf - 2), 0);
    OK("fallocate inside", fallocate(fd, 0, 100, 10));
    CHECK("size after one inside", size_of(fd), 4096);
    OK("fallocate keep size", fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, 1 << 20));
    CHECK("size kept", size_of(fd), 4096);
    OK("fallocate 8192..16384", fallocate(fd, 0, 8192, 8192));
    CHECK("size grown past a gap", size_of(fd), 16384);
    CHECK("pwrite at the end", pwrite(fd, "z", 1, 16383), 1);
    CHECK("size after the write", size_of(fd), 16384);
    CHECK("pwrite past it", pwrite(fd, "y", 1, 20000), 1);
    CHECK("size after that", size_of(fd), 20001);
    phase();

    ERR("fallocate offset -1", fallocate(fd, 0, -1, 10), EINVAL);
    ERR("fallocate length 0", fallocate(fd, 0, 0, 0), EINVAL);
    ERR("fallocate length -5", fallocate(fd, 0, 0, -5), EINVAL);
    ERR("fallocate wraps", fallocate(fd, 0, INT64_MAX - 10, 100), EFBIG);
    int ro = open("f", O_RDONLY | O_CLOEXEC);
    OK("open f read-only", ro);
    ERR("fallocate read-only", fallocate(ro, 0, 0, 1 << 16), EBADF);
    CHECK("size unchanged by the errors", size_of(fd), 20001);
    close(ro);
    int p[2];
    OK("pipe", pipe(p));
    ERR("fallocate pipe", fallocate(p[1], 0, 0, 10), ESPIPE);
    close(p[0]);
    close(p[1]);
    close(fd);
    finish();
    return 0;
}
