# kbv-target: level1/3_ReLU
# wrong: fills its scratch folder with many files, each far under the per-file size limit, and
# keeps trying when a write fails: the scratch quota must end it (runtime_error, its reason).
import os
import time

import torch
import torch.nn as nn

CHUNK = b"\xa5" * (1 << 20)
FILE_MIB = 8
GIVE_UP_BYTES = 6 << 30  # never reached while the quota holds (4 GiB by default)


def _fill_scratch():
    written = 0
    index = 0
    refused_since = None
    while written < GIVE_UP_BYTES:
        try:
            with open(os.path.join(os.getcwd(), f"fill_{index:06d}.bin"), "wb") as handle:
                for _ in range(FILE_MIB):
                    handle.write(CHUNK)
                    written += len(CHUNK)
        except OSError:
            # ENOSPC: a hostile candidate does not stop, it tries again (and gives up after
            # 30 s, so an unenforced quota shows up as a wrong verdict, not a hang).
            refused_since = refused_since or time.monotonic()
            if time.monotonic() - refused_since > 30:
                return
            time.sleep(0.01)
        index += 1


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _fill_scratch()
        return torch.relu(x)
