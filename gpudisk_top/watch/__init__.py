"""Free space of configured paths: read without blocking the sampler, shown and exported.

    from gpudisk_top.watch import FreeSpaceWatch, format_free_space
"""

from gpudisk_top.watch.config import WatchConfig, parse_watch, watched_paths
from gpudisk_top.watch.freespace import (GB, FreeSpace, FreeSpaceWatch, format_free_space,
                                         human_bytes, statvfs_path)

__all__ = ["GB", "FreeSpace", "FreeSpaceWatch", "WatchConfig", "format_free_space",
           "human_bytes", "parse_watch", "statvfs_path", "watched_paths"]
