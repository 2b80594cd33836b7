/* smartshim: an LD_PRELOAD library that lets the real, unmodified smartctl talk to a
 * fake drive whose answers come from a data file, and never to a real device.
 *
 *   SMARTSHIM_PATH=/nonexistent/smartshim-nvme0  the one path it answers for: absolute,
 *                                                 not under /dev/, and not existing
 *   SMARTSHIM_DATA=/tmp/x/drive.pages            the drive's raw pages (tests/smartshim/
 *                                                 pages.py writes them)
 *   LD_PRELOAD=/tmp/x/smartshim.so smartctl -d nvme -x /nonexistent/smartshim-nvme0
 *
 * open()/openat() (and their glibc aliases) of exactly SMARTSHIM_PATH return an anonymous
 * memfd the shim tracks; ioctl() on that descriptor is answered from the pages, the way
 * Linux's NVMe driver (NVME_IOCTL_ID, NVME_IOCTL_ADMIN_CMD) and its IDE ioctls
 * (HDIO_DRIVE_CMD, HDIO_DRIVE_TASK: what `smartctl -d ata` uses, smartmontools
 * os_linux.cpp linux_ata_device) answer; close() forgets it.  Every other path, descriptor
 * and ioctl goes to libc untouched (dlsym RTLD_NEXT).
 *
 * Safety: if SMARTSHIM_PATH is relative, starts with /dev/, or exists (anything lstat()
 * finds), opening it fails with ENOENT and nothing else happens: the shim never opens,
 * and never passes on, a path it was asked to stand in for.  It writes nothing anywhere:
 * the only file it opens is SMARTSHIM_DATA, read-only; it emulates no command that
 * writes to a drive (SMART WRITE LOG, HDIO_DRIVE_TASKFILE, NVMe set features, self-tests
 * are answered as a drive that aborts them).
 *
 * Data file: "SMSHIM01", then records of a 16-byte NUL-padded name, a little-endian
 * u32 length and that many bytes.  Names:
 *   nvme.id_ctrl (4096)  nvme.id_ns (4096)  nvme.log.XX (LID XX, hex; any length)
 *   ata.identify (512)  ata.smart_values (512)  ata.thresholds (512)
 *   ata.log.XX (SMART log address XX, 512 per sector)  ata.status (1 byte: 0 passed,
 *   1 failed: SMART RETURN STATUS answers LBA mid/high f4/2c)
 * A page that is not in the file is a command the drive does not support.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#include <linux/hdreg.h>
#include <linux/nvme_ioctl.h>

#define MAX_FDS 16
#define MAX_PAGES 64

struct page {
    char name[17];
    uint32_t len;
    unsigned char *data;
};

static int tracked[MAX_FDS];
static int ntracked;
static struct page pages[MAX_PAGES];
static int npages = -1;            /* -1: not loaded yet */

static int (*real_open)(const char *, int, ...);
static int (*real_open64)(const char *, int, ...);
static int (*real_openat)(int, const char *, int, ...);
static int (*real_openat64)(int, const char *, int, ...);
static int (*real___open_2)(const char *, int);
static int (*real___open64_2)(const char *, int);
static int (*real___openat_2)(int, const char *, int);
static int (*real___openat64_2)(int, const char *, int);
static int (*real_close)(int);
static int (*real_ioctl)(int, unsigned long, ...);

static void *next(const char *name)
{
    return dlsym(RTLD_NEXT, name);
}

#define RESOLVE(sym) do { if (!real_##sym) real_##sym = next(#sym); } while (0)

/* ------------------------------------------------------------------ the path */

/* 1: `path` is the one we stand in for (and it is safe to); 0: not ours; -1: ours but
 * refused (errno = ENOENT) */
static int ours(const char *path)
{
    const char *want = getenv("SMARTSHIM_PATH");
    struct stat st;
    if (!path || !want || !*want || strcmp(path, want) != 0)
        return 0;
    if (want[0] != '/' || strncmp(want, "/dev/", 5) == 0 || lstat(want, &st) == 0
        || errno != ENOENT) {
        errno = ENOENT;
        return -1;
    }
    return 1;
}

static int load_pages(void)
{
    const char *file = getenv("SMARTSHIM_DATA");
    unsigned char head[20];
    int fd;
    RESOLVE(open);
    RESOLVE(close);
    if (npages >= 0)
        return 0;
    if (!file || !real_open)
        return -1;
    fd = real_open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    if (read(fd, head, 8) != 8 || memcmp(head, "SMSHIM01", 8) != 0) {
        real_close(fd);
        return -1;
    }
    npages = 0;
    while (npages < MAX_PAGES && read(fd, head, 20) == 20) {
        struct page *p = &pages[npages];
        uint32_t got = 0;
        memcpy(p->name, head, 16);
        p->name[16] = 0;
        p->len = head[16] | head[17] << 8 | head[18] << 16 | (uint32_t)head[19] << 24;
        if (p->len > (1u << 20) || !(p->data = calloc(1, p->len ? p->len : 1)))
            break;
        while (got < p->len) {
            ssize_t n = read(fd, p->data + got, p->len - got);
            if (n <= 0)
                break;
            got += (uint32_t)n;
        }
        if (got != p->len)
            break;
        npages++;
    }
    real_close(fd);
    return 0;
}

static const struct page *find(const char *name)
{
    for (int i = 0; i < npages; i++)
        if (strcmp(pages[i].name, name) == 0)
            return &pages[i];
    return NULL;
}

static int fake_fd(void)
{
    int fd;
    if (load_pages() < 0 || ntracked >= MAX_FDS) {
        errno = EIO;
        return -1;
    }
    fd = memfd_create("smartshim", MFD_CLOEXEC);
    if (fd >= 0)
        tracked[ntracked++] = fd;
    return fd;
}

static int is_tracked(int fd)
{
    for (int i = 0; i < ntracked; i++)
        if (tracked[i] == fd)
            return 1;
    return 0;
}

/* ------------------------------------------------------------------ open, close */

/* open(2)'s mode argument is there only with O_CREAT or O_TMPFILE */
#define MODE_ARG(flags, mode)                                                        \
    do {                                                                             \
        if ((flags) & (O_CREAT | __O_TMPFILE)) {                                     \
            va_list ap;                                                              \
            va_start(ap, flags);                                                     \
            mode = va_arg(ap, mode_t);                                               \
            va_end(ap);                                                              \
        }                                                                            \
    } while (0)

/* First in every open wrapper: the path we stand in for opens as a tracked memfd, or
 * fails (ENOENT) where it is refused; any other path goes on to libc */
#define STAND_IN(path)                                                               \
    do {                                                                             \
        int r_ = ours(path);                                                         \
        if (r_)                                                                      \
            return r_ < 0 ? -1 : fake_fd();                                          \
    } while (0)

int open(const char *path, int flags, ...)
{
    mode_t mode = 0;
    STAND_IN(path);
    MODE_ARG(flags, mode);
    RESOLVE(open);
    return real_open(path, flags, mode);
}

int open64(const char *path, int flags, ...)
{
    mode_t mode = 0;
    STAND_IN(path);
    MODE_ARG(flags, mode);
    RESOLVE(open64);
    return real_open64(path, flags, mode);
}

int openat(int dirfd, const char *path, int flags, ...)
{
    mode_t mode = 0;
    STAND_IN(path);
    MODE_ARG(flags, mode);
    RESOLVE(openat);
    return real_openat(dirfd, path, flags, mode);
}

int openat64(int dirfd, const char *path, int flags, ...)
{
    mode_t mode = 0;
    STAND_IN(path);
    MODE_ARG(flags, mode);
    RESOLVE(openat64);
    return real_openat64(dirfd, path, flags, mode);
}

int __open_2(const char *path, int flags)
{
    STAND_IN(path);
    RESOLVE(__open_2);
    return real___open_2(path, flags);
}

int __open64_2(const char *path, int flags)
{
    STAND_IN(path);
    RESOLVE(__open64_2);
    return real___open64_2(path, flags);
}

int __openat_2(int dirfd, const char *path, int flags)
{
    STAND_IN(path);
    RESOLVE(__openat_2);
    return real___openat_2(dirfd, path, flags);
}

int __openat64_2(int dirfd, const char *path, int flags)
{
    STAND_IN(path);
    RESOLVE(__openat64_2);
    return real___openat64_2(dirfd, path, flags);
}

int close(int fd)
{
    for (int i = 0; i < ntracked; i++) {
        if (tracked[i] == fd) {
            tracked[i] = tracked[--ntracked];
            break;
        }
    }
    RESOLVE(close);
    return real_close(fd);
}

/* ------------------------------------------------------------------ NVMe */

/* NVMe status (Status Code Type << 8 | Status Code), as the kernel returns it from
 * NVME_IOCTL_ADMIN_CMD */
#define NVME_SC_INVALID_OPCODE 0x0001
#define NVME_SC_INVALID_FIELD 0x0002
#define NVME_SC_INVALID_NS 0x000b
#define NVME_SC_INVALID_LOG_PAGE 0x0109

static void copy_out(struct nvme_passthru_cmd *pt, const struct page *p, uint64_t offset)
{
    unsigned char *dst = (unsigned char *)(uintptr_t)pt->addr;
    uint32_t n = pt->data_len;
    memset(dst, 0, n);
    if (offset < p->len) {
        uint64_t have = p->len - offset;
        memcpy(dst, p->data + offset, have < n ? (size_t)have : n);
    }
}

static int nvme_admin(struct nvme_passthru_cmd *pt)
{
    char name[17];
    const struct page *p;
    pt->result = 0;
    if (!pt->addr && pt->data_len) {
        errno = EFAULT;
        return -1;
    }
    switch (pt->opcode) {
    case 0x06: { /* Identify */
        unsigned cns = pt->cdw10 & 0xff;
        if (cns == 0x01)
            p = find("nvme.id_ctrl");
        else if (cns == 0x00) {
            if (pt->nsid != 1)
                return NVME_SC_INVALID_NS;
            p = find("nvme.id_ns");
        } else
            return NVME_SC_INVALID_FIELD;
        if (!p)
            return NVME_SC_INVALID_FIELD;
        copy_out(pt, p, 0);
        return 0;
    }
    case 0x02: { /* Get Log Page */
        unsigned lid = pt->cdw10 & 0xff;
        uint64_t offset = pt->cdw12 | (uint64_t)pt->cdw13 << 32;
        snprintf(name, sizeof(name), "nvme.log.%02x", lid);
        p = find(name);
        if (!p)
            return NVME_SC_INVALID_LOG_PAGE;
        copy_out(pt, p, offset);
        return 0;
    }
    default:    /* Get/Set Features, Device Self-test, Format, ...: not emulated */
        return NVME_SC_INVALID_OPCODE;
    }
}

/* ------------------------------------------------------------------ ATA (HDIO) */

#define ATA_STATUS_OK 0x50      /* DRDY | DSC */
#define ATA_STATUS_ERR 0x51     /* ... | ERR */
#define ATA_ERR_ABRT 0x04

static int ata_abort(unsigned char *args)
{
    args[0] = ATA_STATUS_ERR;
    args[1] = ATA_ERR_ABRT;
    errno = EIO;
    return -1;
}

static int ata_data(unsigned char *args, const struct page *p, unsigned sectors)
{
    if (!p || p->len < 512u * sectors)
        return ata_abort(args);
    memcpy(args + 4, p->data, 512u * sectors);
    args[0] = ATA_STATUS_OK;
    args[1] = 0;
    args[2] = (unsigned char)sectors;
    return 0;
}

/* HDIO_DRIVE_CMD: args[0] command, [1] sector number (the SMART log address), [2]
 * features, [3] sector count; data comes back at args + 4 */
static int hdio_drive_cmd(unsigned char *args)
{
    char name[17];
    unsigned sectors = args[3] ? args[3] : 1;
    if (sectors > 1)            /* smartctl's buffer holds one sector (BUFFER_LENGTH) */
        return ata_abort(args);
    switch (args[0]) {
    case 0xec:  /* IDENTIFY DEVICE */
        return ata_data(args, find("ata.identify"), 1);
    case 0xe5:  /* CHECK POWER MODE: active or idle (never asleep) */
        args[0] = ATA_STATUS_OK;
        args[1] = 0;
        args[2] = 0xff;
        return 0;
    case 0xb0:  /* SMART */
        switch (args[2]) {
        case 0xd0:  /* READ DATA */
            return ata_data(args, find("ata.smart_values"), 1);
        case 0xd1:  /* READ THRESHOLDS */
            return ata_data(args, find("ata.thresholds"), 1);
        case 0xd5:  /* READ LOG */
            snprintf(name, sizeof(name), "ata.log.%02x", args[1]);
            return ata_data(args, find(name), 1);
        case 0xd8:  /* ENABLE OPERATIONS: already enabled */
        case 0xda:  /* RETURN STATUS (the data-less form) */
            args[0] = ATA_STATUS_OK;
            args[1] = 0;
            return 0;
        default:    /* self-tests, offline, autosave, WRITE LOG: not emulated */
            return ata_abort(args);
        }
    default:        /* IDENTIFY PACKET DEVICE and anything else */
        return ata_abort(args);
    }
}

/* HDIO_DRIVE_TASK: args[0] command, [1] features, [4] LBA mid, [5] LBA high */
static int hdio_drive_task(unsigned char *args)
{
    const struct page *p;
    if (args[0] != 0xb0 || args[1] != 0xda)     /* only SMART RETURN STATUS */
        return ata_abort(args);
    p = find("ata.status");
    if (!p || p->len < 1)
        return ata_abort(args);
    args[0] = ATA_STATUS_OK;
    if (p->data[0]) {           /* threshold exceeded */
        args[4] = 0xf4;
        args[5] = 0x2c;
    } else {
        args[4] = 0x4f;
        args[5] = 0xc2;
    }
    return 0;
}

/* ------------------------------------------------------------------ ioctl */

int ioctl(int fd, unsigned long request, ...)
{
    va_list ap;
    void *arg;
    va_start(ap, request);
    arg = va_arg(ap, void *);
    va_end(ap);
    if (!is_tracked(fd)) {
        RESOLVE(ioctl);
        return real_ioctl(fd, request, arg);
    }
    switch (request) {
    case NVME_IOCTL_ID:
        return find("nvme.id_ctrl") ? 1 : (errno = ENOTTY, -1);
    case NVME_IOCTL_ADMIN_CMD:
        if (!find("nvme.id_ctrl"))
            break;
        return nvme_admin((struct nvme_passthru_cmd *)arg);
    case HDIO_DRIVE_CMD:
        if (!find("ata.identify"))
            break;
        return hdio_drive_cmd((unsigned char *)arg);
    case HDIO_DRIVE_TASK:
        if (!find("ata.identify"))
            break;
        return hdio_drive_task((unsigned char *)arg);
    default:    /* HDIO_GET_IDENTITY, HDIO_DRIVE_TASKFILE (writes), SG_IO, ... */
        break;
    }
    errno = ENOTTY;
    return -1;
}
