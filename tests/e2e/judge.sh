# shellcheck shell=sh
# Judging a rate from what the datapath decided, not from what the guest managed to push
# (sourced by e2e.sh in the VM). class_clock samples a class's clock, its charged bytes and
# drops, and the device's transmitted bytes every 10 ms, 2 ms above 50 Mbit/s
# (tests/e2e/class_clock.c); from that:
#
# - Never faster (a hard bound, true on any machine): from the first sample, before the traffic,
#   the device has sent at most rate x elapsed, plus what the class had stamped already, plus
#   1 % and one 64 KB GSO packet, at every sample. A stalled guest only sends later, never more.
# - As fast as configured when the shaper is the bottleneck: over each 0.5 s window in which the
#   class held a backlog (at every sample its clock ahead of now) and the guest did not stall
#   (no gap between samples over 30 ms), the shaper stamped at the rate: the bytes it charged
#   per second its clock advanced, less what it may have jumped to now between two samples
#   (within 10 %), and over all such windows together the rate
#   within the case's tolerance, less one GSO packet. That is what the shaper decides; when it
#   is right, what the device sends over such a window is the rate less what a starved guest
#   had not yet sent of packets already due, so the device's rate is printed beside it, with
#   how far the guest's transmit fell behind the stamps, but not judged. A window where the
#   class ran dry was the sender's (a starved guest), not the shaper's: not judged, but
#   counted, and told apart when the class had dropped packets just before.
# Too few windows to judge (under half of them, or under 2) is neither a pass nor a failure:
# the case says what it saw and runs again, at a rate the guest can offer.

CLOCK_PERIOD_MS=10

# clock_start NS DEV CLASS SECONDS OUT [PERIOD_MS]: samples in the background into OUT
# ($CLOCK_PID). A fast class needs samples closer than the backlog its sender keeps (at 200 Mbit
# a TCP flow keeps about 6 ms queued), or every gap between two looks like a clock run dry.
clock_start() {
  class_clock --netns "$1" --dev "$2" --class "$3" --period-ms "${6:-$CLOCK_PERIOD_MS}" --seconds "$4" \
    >"$5" 2>"$5.err" &
  CLOCK_PID=$!
  sleep 0.1  # a first sample before the traffic starts
}

# clock_now_s SAMPLES: the seconds of the latest sample, from the first one.
clock_now_s() { awk 'NR == 1 { t0 = $1 } END { printf "%.3f", ($1 - t0) / 1e9 }' "$1"; }

# clock_judge SAMPLES RATE_BPS FROM_S TO_S TOL_PCT [ORIGIN_S [GSO_BYTES [HELD_BYTES]]]
# Judges the samples from FROM_S to TO_S (seconds from the first sample) at RATE_BPS, with the
# never-faster bound counted from ORIGIN_S (default 0) and GSO_BYTES the largest packet the
# sender builds (default 70000: a 64 KB GSO packet with its headers); HELD_BYTES (default 0)
# is what held flows may add to that bound (they leave up to 250 ms after their slots: fair.h).
# The device's counters are turned into the class's charge for TCP with timestamps and
# --overhead 24: a packet of S segments (a GSO packet is counted once, with one set of headers,
# as it leaves sch_fq) is 66 + 1448 S bytes on the device and 1538 S charged. The mean over the judged windows may miss by one 64 KB GSO packet.
# Prints "VERDICT|TEXT", VERDICT one of PASS FAIL UNJUDGED.
clock_judge() {
  awk -v R="$2" -v from="$3" -v to="$4" -v tol="$5" -v origin="${6:-0}" \
      -v gapmax=0.030 -v L=0.5 -v G="${7:-70000}" -v H="${8:-0}" -v mode="${CLOCK_MODE:-judge}" '
    { n++; t[n] = $1 / 1e9; tat[n] = $2 / 1e9; ch[n] = $3; dr[n] = $4; tx[n] = ($5 - 66 * $6) * 1538 / 1448 }
    END {
      if (n < 3) { print "UNJUDGED|no samples of the class clock"; exit }
      t0 = t[1]
      for (o = 1; o < n && t[o] - t0 < origin; o++) {}
      b0 = (tat[o] > t[o] ? tat[o] - t[o] : 0)
      worst = -1e18
      for (i = o; i <= n && t[i] - t0 <= to; i++) {
        ex = tx[i] - tx[o] - (R / 8 * (t[i] - t[o] + b0) * 1.01 + G + H)
        if (ex > worst) { worst = ex; at = t[i] - t0 }
      }
      for (a = from; a + L <= to + 1e-9; a += L) {
        w++
        for (ia = 1; ia <= n && t[ia] - t0 < a; ia++) {}
        for (ib = ia; ib < n && t[ib + 1] - t0 <= a + L; ib++) {}
        if (ia > n || ib <= ia) { stalled++; continue }
        stall = (t[ia] - t0 - a > gapmax) || (a + L - (t[ib] - t0) > gapmax)
        # Backlogged: the clock ahead of now at every sample. Between two samples it may still
        # have run dry (at 200 Mbit a TCP sender keeps about a millisecond queued) and jumped
        # to now at its next charge, time nothing was charged for: at most the next sample
        # time less the clock (jump). The clock advanced less those jumps is the time charged
        # for, the best case for the shaper; a window where they could be over half of it
        # says little and counts as run dry.
        dry = 0; jump = 0
        for (k = ia; k <= ib; k++) {
          if (k > ia && t[k] - t[k - 1] > gapmax) stall = 1
          if (tat[k] <= t[k]) dry = 1
          if (k < ib && t[k + 1] > tat[k]) jump += t[k + 1] - tat[k]
        }
        if (jump * 2 > t[ib] - t[ia]) dry = 1
        if (stall) { stalled++; continue }
        if (dry) { idle++; k = (ia > 50 ? ia - 50 : 1); if (dr[ib] > dr[k]) dropped++; continue }
        judged++
        # The shaper: bytes charged per second of clock advanced. The device: bytes sent per
        # second, and how much more of what was due it held at the end than at the start
        # (charged, less sent, less the backlog still ahead of now).
        csecs = tat[ib] - tat[ia] - jump; charged = ch[ib] - ch[ia]; jumps += jump
        secs = t[ib] - t[ia]; sent = tx[ib] - tx[ia]
        jcsecs += csecs; jraw += csecs + jump; jcharged += charged; jsecs += secs; jsent += sent
        lag = (ch[ib] - tx[ib] - (tat[ib] - t[ib]) * R / 8) - (ch[ia] - tx[ia] - (tat[ia] - t[ia]) * R / 8)
        if (lag > maxlag) maxlag = lag
        if (charged * 8 < (R * 0.9) * csecs - G * 8) low = low sprintf(" %.1f:%.2f", a, charged * 8 / csecs / 1e6)
      }
      if (mode == "count") { printf "%d %d\n", judged, w; exit }
      mean = (jcsecs > 0 ? jcharged * 8 / jcsecs : 0)
      # With jumps, what was stamped lies between the bytes over the whole advance and over
      # the advance less the jumps; the judgement takes the latter, the shaper'"'"'s best case.
      span = (jumps > 0.001 ? sprintf("%.2f to ", jcharged * 8 / jraw / 1e6) : "")
      text = sprintf("judged %d of %d windows: stamped at %s%.2f Mbit/s (%.2f expected, ±%s%%), the device sent %.2f", judged, w, span, mean / 1e6, R / 1e6, tol, (jsecs > 0 ? jsent * 8 / jsecs / 1e6 : 0))
      if (maxlag > G) text = text sprintf(" (the guest'"'"'s transmit up to %.0f kB behind the stamps in a window)", maxlag / 1000)
      if (jumps > 0.001) text = text sprintf(" (the clock may have jumped to now for up to %.0f ms of it)", jumps * 1000)
      if (idle) text = text sprintf(", %d with the class run dry (%d after drops)", idle, dropped)
      if (stalled) text = text sprintf(", %d with the guest stalled", stalled)
      text = text sprintf("; most sent ahead of the rate %.0f B (bound 0) at %.2f s", worst, at)
      if (worst > 0) { print "FAIL|faster than configured: " text; exit }
      if (low != "") { print "FAIL|backlogged windows stamped under 90 % of the rate (start:Mbit/s)" low ": " text; exit }
      if (judged < 2 || judged * 2 < w) { print "UNJUDGED|" text; exit }
      if (mean < R * (1 - tol / 100) - G * 8 / jcsecs) { print "FAIL|slower than configured while backlogged: " text; exit }
      print "PASS|" text
    }' "$1"
}

# clock_backlogged SAMPLES FROM_S TO_S: "JUDGED WINDOWS", how many of the 0.5 s windows the
# class held a backlog through with the guest running: where the receiver's goodput of one of
# several classes on a device says something about the shaper.
clock_backlogged() {
  CLOCK_MODE=count
  clock_judge "$1" 0 "$2" "$3" 0
  CLOCK_MODE=judge
}
