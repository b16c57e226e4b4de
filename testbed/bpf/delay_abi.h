// Shared between delay_tap.bpf.c and delay_line.cpp.
#pragma once

#define LANES_DELAY_MARK 0x6c6e444cu  // "lnDL": a packet the delay line let go
