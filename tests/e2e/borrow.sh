# shellcheck shell=sh
# Borrowing with real TCP (sourced by e2e.sh in the VM; bench/borrow.sh sources its helpers).
# A 20 Mbit parent on va0 with two children that borrow its spare: A (5 Mbit, ceil 20 Mbit, 8
# TCP flows) and B (15 Mbit, ceil 20 Mbit, 1 flow), steered by the senders' ports; the guest's
# default tcp_ecn=2 (no ECN asked for). Every share is judged from the datapath's own counters
# and clocks, sampled every 10 ms through the pins (class_clock, judge.sh): what the shaper let
# each class send, not what iperf3 reports.
#
# Sample files hold one sample a line, MONO_NS TAT_NS BYTES ... (class_clock's; bench/borrow.sh
# writes HTB's classes the same way, TAT_NS 0: HTB keeps no clock to read).

# bw_departed FILE > OUT: a class_clock file turned into what its class let leave: each sample
# becomes MONO_NS 0 BYTES, BYTES the count of the packets whose departure had come by then.
# A class's packets leave in the order its clock stamps them, a lent one up to its loan's slack
# later (bpf/borrow.h: what the packet would have added to the class's clock on its guarantee
# beyond its allotment; 79 ms for 64 KB at 5 against 20 Mbit), so the count at time T is what
# the class had charged when its clock (or now, where the clock was behind it) reached T, read
# between the samples that bracket it, ahead of the departures by at most one slack's worth. A charged count alone runs ahead by
# the backlog stamped into the future, which grows and shrinks by tens of ms (hundreds of kB
# at 20 Mbit) as TCP's windows move; this one counts packets as they are due to leave.
bw_departed() {
  awk '{ n++; t[n] = $1; m[n] = ($2 > $1 ? $2 : $1); c[n] = $3 }
    END {
      j = 1
      for (i = 1; i <= n; i++) {
        while (j < n && m[j + 1] <= t[i]) j++
        d = c[j]
        if (m[j] <= t[i] && j < n && m[j + 1] > m[j]) d += (c[j + 1] - c[j]) * (t[i] - m[j]) / (m[j + 1] - m[j])
        else if (m[j] > t[i]) d = (j > 1 ? c[j - 1] : c[j])
        printf "%.0f 0 %.0f\n", t[i], d
      }
    }' "$1"
}

# bw_last FILE: the latest whole sample's time (the last line may still be being written).
bw_last() { tail -n 2 "$1" | head -n 1 | cut -d' ' -f1; }
# bw_bytes FILE: the latest whole sample's count.
bw_bytes() {
  local _b
  _b=$(tail -n 2 "$1" | head -n 1 | cut -d' ' -f3)
  case $_b in '' | *[!0-9]*) echo 0 ;; *) echo "$_b" ;; esac
}

# bw_rate FILE FROM_NS TO_NS: bits/s counted from the first sample at or after FROM_NS to the
# last at or before TO_NS (0 without two samples).
bw_rate() {
  awk -v a="$2" -v b="$3" '$1 >= a && $1 <= b { if (!n++) { t0 = $1; c0 = $3 } t1 = $1; c1 = $3 }
    END { if (n >= 2 && t1 > t0) printf "%.0f\n", (c1 - c0) * 8e9 / (t1 - t0); else print 0 }' "$1"
}

# bw_series FILE FROM_NS STEP_MS COUNT: the rate in Mbit/s over COUNT steps of STEP_MS from
# FROM_NS, each between the samples that bracket it ("-" where none do).
bw_series() {
  awk -v a="$2" -v s="$3" -v k="$4" '{ n++; t[n] = $1; c[n] = $3 }
    END {
      s *= 1e6; i = 1
      for (q = 0; q < k; q++) {
        lo = a + q * s; hi = lo + s
        while (i < n && t[i + 1] <= lo) i++
        for (j = i; j < n && t[j + 1] <= hi; j++) {}
        if (j > i && t[j] > t[i]) printf "%s%.1f", (q ? " " : ""), (c[j] - c[i]) * 8e3 / (t[j] - t[i])
        else printf "%s-", (q ? " " : "")
      }
      print ""
    }' "$1"
}

# bw_stop FILE FROM_NS TO_NS: when the class stopped: the last sample, from FROM_NS on, before
# its count came within two full frames of where it stands at TO_NS (at most a sample early);
# empty if it counted less than that from FROM_NS on.
bw_stop() {
  awk -v a="$2" -v b="$3" '$1 >= a && $1 <= b { n++; t[n] = $1; c[n] = $3 }
    END { for (i = n; i >= 1 && c[i] >= c[n] - 3076; i--) {} if (i >= 1) print t[i] }' "$1"
}

# bw_start FILE FROM_NS: the last sample from FROM_NS on before the class counted two full frames
# more than at FROM_NS (at most a sample early: an iperf3 control connection's few bytes are not
# a start); empty if it never did.
bw_start() {
  awk -v a="$2" '$1 >= a { if (!n++) base = $3; if ($3 > base + 3076) { print p; exit } p = $1 }' "$1"
}

# bw_cross FILE FROM_NS TO_NS LEVEL_BPS up|down [WINDOW_MS]: "MS GAP_MS": the end, in ms from
# FROM_NS, of the first window of at least WINDOW_MS (default 50) ending after FROM_NS whose rate
# was at or above (up) or at or below (down) LEVEL_BPS, -1 if none by TO_NS; and the longest gap
# between two samples up to then (the guest stalled). A window may reach back before FROM_NS:
# that only makes the crossing later.
bw_cross() {
  awk -v a="$2" -v z="$3" -v lvl="$4" -v dir="$5" -v w="${6:-50}" '{ n++; t[n] = $1; c[n] = $3 }
    END {
      w *= 1e6; j = 1
      for (i = 2; i <= n; i++) {
        if (t[i] <= a) continue
        if (t[i] > z) break
        if (t[i] - t[i - 1] > gap) gap = t[i] - t[i - 1]
        while (j < i && t[j + 1] <= t[i] - w) j++
        if (t[i] - t[j] < w) continue
        r = (c[i] - c[j]) * 8e9 / (t[i] - t[j])
        if ((dir == "up" && r >= lvl) || (dir == "down" && r <= lvl)) {
          printf "%.0f %.0f\n", (t[i] - a) / 1e6, gap / 1e6; exit
        }
      }
      printf "-1 %.0f\n", gap / 1e6
    }' "$1"
}

# bw_stamped FILE FROM_NS TO_NS LEVEL_BPS up|down: ms from FROM_NS to the first sample at which
# the class, its clock ahead of now throughout the step from the sample before (no jump to now
# in between), was stamped at or above (up) or at or below (down) LEVEL_BPS: bytes charged per
# second its clock advanced, the rate the datapath decided; -1 if none by TO_NS.
bw_stamped() {
  awk -v a="$2" -v z="$3" -v lvl="$4" -v dir="$5" '
    $1 > z { exit }
    n++ && $1 > a && k >= $1 && $2 - k >= 2e6 {
      r = ($3 - c) * 8e9 / ($2 - k)
      if ((dir == "up" && r >= lvl) || (dir == "down" && r <= lvl)) { found = 1; printf "%.0f\n", ($1 - a) / 1e6; exit }
    }
    { k = $2; c = $3 }
    END { if (!found) print -1 }' "$1"
}

# bw_ahead_ms FILE AT_NS: how far the class clock stood ahead of now (its backlog) at the last
# sample at or before AT_NS.
bw_ahead_ms() { awk -v a="$2" '$1 <= a { d = $2 - $1 } END { printf "%.0f\n", d / 1e6 }' "$1"; }

# bw_backlogged FILE FROM_NS TO_NS: "JUDGED WINDOWS" (judge.sh's clock_backlogged): the 0.5 s
# windows over which the class held a backlog with the guest running.
bw_backlogged() {
  local _t0
  _t0=$(head -n 1 "$1" | cut -d' ' -f1)
  clock_backlogged "$1" "$(calc "($2 - $_t0) / 1e9")" "$(calc "($3 - $_t0) / 1e9")"
}

# bw_delta BEFORE AFTER ID: what class ID borrowed and dropped between two `status --json`.
bw_delta() {
  jq -rn --slurpfile a "$1" --slurpfile b "$2" --argjson id "$3" '
    [$a[0].classes[], $b[0].classes[]] | map(select(.id == $id)) as [$x, $y]
    | "borrowed \(($y.borrowed_bytes - $x.borrowed_bytes) / 1000 | round) kB, ceil_held \($y.ceil_held - $x.ceil_held), drops \($y.drops - $x.drops) (fair \($y.drops_fair - $x.drops_fair))"' 2>/dev/null
}

# --- the case ----------------------------------------------------------------

BW_NS=snd BW_DEV=va0
# B's flow gets a fresh server each time it starts again (an iperf3 server takes one test at a
# time, and one just stopped may not have noticed yet).
BW_B_PORTS="5212 5213 5214 5215 5216 5217"
BW_B_NEXT=0 BW_B_PID="" BW_B_PORT="" BW_A_PID="" BW_CLOCKS=""
BW_REF_OK=0 BW_PARENT=""

bw_status() { status_json "$BW_NS" "$BW_DEV" >"$1" 2>/dev/null || echo '{"classes": []}' >"$1"; }

# bw_clock ID FILE: class_clock on class ID every 10 ms until killed.
bw_clock() {
  clock_start "$BW_NS" "$BW_DEV" "$1" 600 "$2"
  BW_CLOCKS="$BW_CLOCKS $CLOCK_PID"
}

# bw_wait_counting FILE: until the class counted 64 KB more than now (15 s at most).
bw_wait_counting() {
  local _b0 _i=0
  _b0=$(bw_bytes "$1")
  while [ "$(bw_bytes "$1")" -le $((_b0 + 65536)) ]; do
    _i=$((_i + 1))
    [ "$_i" -lt 150 ] || return 1
    sleep 0.1
  done
}
# bw_wait_quiet FILE: until the class counted under two full frames in 0.3 s (5 s at most).
bw_wait_quiet() {
  local _b0 _b1 _i=0
  _b0=$(bw_bytes "$1")
  while :; do
    sleep 0.3
    _b1=$(bw_bytes "$1")
    [ $((_b1 - _b0)) -gt 3076 ] || return 0
    _b0=$_b1 _i=$((_i + 1))
    [ "$_i" -lt 17 ] || return 1
  done
}

# bw_client_stop PORT PID: stops the receiver of PORT (SIGINT, as shared_window does: it closes
# its sockets with data unread, so the sender is reset at once) and waits for PID.
bw_client_stop() {
  kill -INT $(ps -o pid,args | awk -v p="iperf3 -c 10.0.0.1 -p $1 " 'index($0, p) && $2 !~ /awk/ { print $1 }') 2>/dev/null || true
  [ -z "$2" ] || wait "$2" 2>/dev/null || true
}
# bw_b_start: B's flow from the next of its servers ($BW_B_PORT, $BW_B_PID).
bw_b_start() {
  # shellcheck disable=SC2086
  set -- $BW_B_PORTS
  shift "$BW_B_NEXT"
  BW_B_PORT=$1 BW_B_NEXT=$((BW_B_NEXT + 1))
  iperf_rx rcv 10.0.0.1 "$BW_B_PORT" "/tmp/bw-b$BW_B_PORT.json" -t 600 &
  BW_B_PID=$!
}
bw_b_stop() {
  [ -n "$BW_B_PID" ] || return 0
  bw_client_stop "$BW_B_PORT" "$BW_B_PID"
  BW_B_PID=""
}

# bw_phase NAME FROM_NS TO_NS TOL_PCT LABEL:FILE:DUE_BPS...: each class's departures over the
# window within TOL_PCT of what it is due (the parent's sum is kept for borrow-parent-20mbit). A
# class short of its due that held a backlog through most of the window was not given it: a
# failure. One short that ran dry was short of senders: the guest's (SKIP), unless A's 8 flows
# filled a 20 Mbit class without a ceil on this guest at the start of the case (the reference):
# then the borrowing class held its own senders back (a failure). A sibling short and dry is
# judged first: its unused guarantee is the other's to borrow.
bw_phase() {
  local _name=$1 _from=$2 _to=$3 _tol=$4 _c _l _f _e _r _bk _msg="" _why="" _dry="" _p
  shift 4
  for _c in "$@"; do
    _l=${_c%%:*} _f=${_c#*:}
    _e=${_f#*:} _f=${_f%%:*}
    bw_departed "$_f" >"$_f.dep"
    _r=$(bw_rate "$_f.dep" "$_from" "$_to")
    _bk=$(bw_backlogged "$_f" "$_from" "$_to")
    _msg="$_msg${_msg:+, }$_l $(fmt_num "$_r" 1e6) Mbit/s (due $(fmt_num "$_e" 1e6) ±$_tol %; backlogged in ${_bk% *} of ${_bk#* } windows)"
    if cond "$_r < $_e * (1 - $_tol / 100)"; then
      if backlogged_enough "$_bk"; then _why="$_why; $_l short while backlogged"; else _dry="$_dry $_l"; fi
    elif cond "$_r > $_e * (1 + $_tol / 100)"; then
      _why="$_why; $_l above its due"
    fi
  done
  # The parent's: what its children let leave (its own count runs ahead with their backlogs).
  bw_departed /tmp/bw-a.clock >/tmp/bw-a.clock.dep
  bw_departed /tmp/bw-b.clock >/tmp/bw-b.clock.dep
  _p=$(calc "$(bw_rate /tmp/bw-a.clock.dep "$_from" "$_to") + $(bw_rate /tmp/bw-b.clock.dep "$_from" "$_to")")
  note "$_name: window $_from to $_to ns (CLOCK_MONOTONIC); A per 0.5 s: $(bw_series /tmp/bw-a.clock.dep "$_from" 500 6), B: $(bw_series /tmp/bw-b.clock.dep "$_from" 500 6) (Mbit/s)"
  BW_PARENT="$BW_PARENT${BW_PARENT:+, }$_name $(fmt_num "$_p" 1e6)"
  _msg="$_msg; parent $(fmt_num "$_p" 1e6) Mbit/s (its own count $(fmt_num "$(bw_rate /tmp/bw-p.clock "$_from" "$_to")" 1e6)); over $(calc "($_to - $_from) / 1e9" | cut -c1-4) s of the datapath's counters; clocks ahead at the start and end (ms): A $(bw_ahead_ms /tmp/bw-a.clock "$_from") $(bw_ahead_ms /tmp/bw-a.clock "$_to"), B $(bw_ahead_ms /tmp/bw-b.clock "$_from") $(bw_ahead_ms /tmp/bw-b.clock "$_to")"
  if [ -n "$_dry" ]; then
    case " $_dry " in
      *" A "*) if [ "$BW_REF_OK" = 1 ]; then
          result FAIL "$_name" "$_msg; A ran dry, yet its 8 flows filled a 20 Mbit class without a ceil at the start (the reference)"
          return
        fi ;;
    esac
    result SKIP "$_name" "$_msg; the guest could not keep$_dry backlogged (busy host)"
  elif [ -n "$_why" ]; then
    result FAIL "$_name" "$_msg${_why}"
  else
    result PASS "$_name" "$_msg"
  fi
}

# bw_window SECONDS: sets BW_FROM and BW_TO to the times of the samples SECONDS apart, with a
# `status --json` before and after (/tmp/bw-s0.json, /tmp/bw-s1.json).
bw_window() {
  bw_status /tmp/bw-s0.json
  BW_FROM=$(bw_last /tmp/bw-a.clock)
  sleep "$1"
  BW_TO=$(bw_last /tmp/bw-a.clock)
  bw_status /tmp/bw-s1.json
  note "A: $(bw_delta /tmp/bw-s0.json /tmp/bw-s1.json 21); B: $(bw_delta /tmp/bw-s0.json /tmp/bw-s1.json 22)"
}

# bw_transition NAME TIME_NS WHAT LEVEL_BPS up|down MORE: the datapath charging A at LEVEL_BPS
# (its decision, bw_stamped) within 200 ms of TIME_NS, and A's departures crossing it (bw_cross,
# 50 ms windows) within 2 s. The decision is the shaper's; the departures follow once the packets
# A had stamped before it have left, as stamped (EDT does not restamp): its queue, reported.
# Longer with the guest stalled (a gap between samples over 30 ms) on the way: SKIP.
bw_transition() {
  local _name=$1 _at=$2 _what=$3 _lvl=$4 _dir=$5 _more=$6 _x _ms _gap _dec
  bw_departed /tmp/bw-a.clock >/tmp/bw-a.clock.dep
  _x=$(bw_cross /tmp/bw-a.clock.dep "$_at" "$((_at + 2000000000))" "$_lvl" "$_dir" 50)
  _ms=${_x% *} _gap=${_x#* }
  _dec=$(bw_stamped /tmp/bw-a.clock "$_at" "$((_at + 2000000000))" "$_lvl" "$_dir")
  _x="A's departures over 50 ms windows reached $(fmt_num "$_lvl" 1e6) Mbit/s $([ "$_ms" -ge 0 ] && echo "$_ms ms" || echo "not within 2 s") after $_what (the window included); the datapath stamped it at that rate from $([ "$_dec" -ge 0 ] && echo "$_dec ms" || echo "no step within 2 s") (bound 200 ms); A per 50 ms from then (Mbit/s): $(bw_series /tmp/bw-a.clock.dep "$_at" 50 10); $_more; longest gap between samples $_gap ms"
  if [ "$_dec" -ge 0 ] && [ "$_dec" -le 200 ] && [ "$_ms" -ge 0 ]; then
    result PASS "$_name" "$_x"
  elif [ "$_gap" -gt 30 ] && { [ "$_dec" -lt 0 ] || [ "$_dec" -gt 200 ] || [ "$_ms" -lt 0 ]; }; then
    result SKIP "$_name" "$_x (the guest stalled on the way)"
  else
    result FAIL "$_name" "$_x"
  fi
}

bw_cleanup() {
  bw_b_stop
  [ -z "$BW_A_PID" ] || bw_client_stop 5211 "$BW_A_PID"
  BW_A_PID=""
  # shellcheck disable=SC2086
  [ -z "$BW_CLOCKS" ] || { kill $BW_CLOCKS 2>/dev/null; wait $BW_CLOCKS 2>/dev/null; }
  BW_CLOCKS=""
  for _p in 21 22 23 24; do shaperctl -n "$BW_NS" del-rule --dev "$BW_DEV" --pref $_p >/dev/null 2>&1; done
  for _c in 21 22 23 20; do wait_drained "$BW_NS" "$BW_DEV" $_c >/dev/null 2>&1; done
  for _c in 21 22 23 20; do shaperctl -n "$BW_NS" del-class --dev "$BW_DEV" --id $_c >/dev/null 2>&1; done
}

case_borrow() {
  local _p _r0 _r1 _ref _bk _k _kc _tb _r _tr _fr _pa _pp _n _p99 _sp _ok=1
  begin "borrowing on va0: parent 20 Mbit; A 5 Mbit ceil 20 Mbit (8 TCP flows), B 15 Mbit ceil 20 Mbit (1 flow); per-class byte counters every 10 ms"
  for _p in 5210 5211 $BW_B_PORTS; do iperf_server snd "$_p"; done
  for _p in 5210 5211 $BW_B_PORTS; do
    wait_listen snd "$_p" || { result FAIL borrow-setup "iperf3 server on $_p did not start"; return; }
  done
  run_ok borrow-setup shaperctl -n snd add-class --dev va0 --id 20 --rate 20mbit --overhead 24 &&
    run_ok borrow-setup shaperctl -n snd add-class --dev va0 --id 21 --parent 20 --rate 5mbit --ceil 20mbit --overhead 24 &&
    run_ok borrow-setup shaperctl -n snd add-class --dev va0 --id 22 --parent 20 --rate 15mbit --ceil 20mbit --overhead 24 &&
    run_ok borrow-setup shaperctl -n snd add-class --dev va0 --id 23 --rate 20mbit --overhead 24 &&
    run_ok borrow-setup shaperctl -n snd add-rule --dev va0 --class 23 --pref 23 --proto tcp --sport 5211 &&
    run_ok borrow-setup shaperctl -n snd add-rule --dev va0 --class 22 --pref 22 --proto tcp --sport 5212-5217 &&
    run_ok borrow-setup shaperctl -n snd add-rule --dev va0 --class 22 --pref 24 --proto icmp ||
    { bw_cleanup; return; }
  bw_clock 21 /tmp/bw-a.clock
  bw_clock 22 /tmp/bw-b.clock
  bw_clock 20 /tmp/bw-p.clock
  bw_clock 23 /tmp/bw-r.clock
  _k=$CLOCK_PID

  # The reference: A's 8 flows first go through class 23, 20 Mbit without a ceil. Whether they
  # fill it tells a guest too busy to offer 20 Mbit from a borrowing class that holds its
  # senders back. Then a rule of lower pref moves them into A, as they run.
  iperf_rx rcv 10.0.0.1 5211 /tmp/bw-a.json -t 600 -P 8 &
  BW_A_PID=$!
  if ! bw_wait_counting /tmp/bw-r.clock; then
    result FAIL borrow-setup "A's flows never reached class 23: $(cat /tmp/bw-a.json.err 2>/dev/null | head -c 300)"
    bw_cleanup
    return
  fi
  sleep 1.5
  _r0=$(bw_last /tmp/bw-r.clock)
  sleep 2
  _r1=$(bw_last /tmp/bw-r.clock)
  bw_departed /tmp/bw-r.clock >/tmp/bw-r.clock.dep
  _ref=$(bw_rate /tmp/bw-r.clock.dep "$_r0" "$_r1") _bk=$(bw_backlogged /tmp/bw-r.clock "$_r0" "$_r1")
  cond "$_ref >= 20e6 * 0.97" && BW_REF_OK=1
  result INFO borrow-reference "A's 8 flows in a 20 Mbit class without a ceil: $(fmt_num "$_ref" 1e6) Mbit/s left over 2 s, backlogged in ${_bk% *} of ${_bk#* } windows ($([ "$BW_REF_OK" = 1 ] && echo "the guest can offer 20 Mbit" || echo "under 97 %: the guest could not offer 20 Mbit"))"
  run_ok borrow-setup shaperctl -n snd add-rule --dev va0 --class 21 --pref 21 --proto tcp --sport 5211 &&
    run_ok borrow-setup shaperctl -n snd del-rule --dev va0 --pref 23 || { bw_cleanup; return; }
  kill "$_k" 2>/dev/null

  # (a) Both busy: each its guarantee.
  bw_b_start
  bw_wait_counting /tmp/bw-b.clock || { result FAIL borrow-setup "B's flow never counted"; bw_cleanup; return; }
  sleep 1.5
  bw_window 3
  _pa=$BW_FROM
  bw_phase borrow-guarantees-5-15 "$BW_FROM" "$BW_TO" 5 "A:/tmp/bw-a.clock:5e6" "B:/tmp/bw-b.clock:15e6"

  # (b) B stops: A borrows up to its ceil; B returns: A gives the spare back.
  _k=$(bw_last /tmp/bw-b.clock)
  bw_b_stop
  bw_wait_quiet /tmp/bw-b.clock || note "B still counting 5 s after its receiver stopped"
  sleep 0.5
  bw_window 3
  bw_departed /tmp/bw-b.clock >/tmp/bw-b.clock.dep
  _tb=$(bw_stop /tmp/bw-b.clock.dep "$_k" "$BW_TO") _kc=$(bw_stop /tmp/bw-b.clock "$_k" "$BW_TO")
  bw_phase borrow-ceil-20mbit "$BW_FROM" "$BW_TO" 3 "A:/tmp/bw-a.clock:20e6"
  # From B's last departure: until then its packets stamped before it stopped still leave, and
  # the parent is full.
  if [ -n "$_tb" ] && [ -n "$_kc" ]; then
    bw_transition borrow-in-200ms "$_tb" "B's last packet left" 18.5e6 up \
      "B's last packet was charged $(calc "($_tb - $_kc) / 1e6" | cut -d. -f1) ms before it left; A's clock then stood $(bw_ahead_ms /tmp/bw-a.clock "$_kc") ms ahead of now (A's packets stamped at 5 Mbit before the loan leave first)"
  else
    result FAIL borrow-in-200ms "B's stop not seen in its counter (from its last sample before the receiver stopped)"
  fi
  _r=$(bw_last /tmp/bw-b.clock)
  bw_b_start
  bw_wait_counting /tmp/bw-b.clock || { result FAIL borrow-given-back-200ms "B's flow never counted again"; _ok=0; }
  sleep 1
  bw_departed /tmp/bw-b.clock >/tmp/bw-b.clock.dep
  _tr=$(bw_start /tmp/bw-b.clock.dep "$_r")
  if [ "$_ok" = 1 ] && [ -n "$_tr" ]; then
    _fr=$(bw_cross /tmp/bw-b.clock.dep "$_tr" "$((_tr + 2000000000))" 13.5e6 up 50)
    bw_transition borrow-given-back-200ms "$_tr" "B's first packet left" 6.5e6 down \
      "B's own departures reached 13.5 Mbit/s after $(echo "$_fr" | cut -d' ' -f1) ms, per 50 ms: $(bw_series /tmp/bw-b.clock.dep "$_tr" 50 10)"
  elif [ "$_ok" = 1 ]; then
    result FAIL borrow-given-back-200ms "B's return not seen in its counter"
  fi

  # (c) A alone with a ceil below the parent: capped at it.
  bw_b_stop
  bw_wait_quiet /tmp/bw-b.clock || note "B still counting 5 s after its receiver stopped"
  run_ok borrow-ceil-10mbit shaperctl -n snd change-class --dev va0 --id 21 --ceil 10mbit || { bw_cleanup; return; }
  sleep 1
  bw_window 3
  bw_phase borrow-ceil-10mbit "$BW_FROM" "$BW_TO" 3 "A:/tmp/bw-a.clock:10e6"

  # (d) Equal guarantees, 8 flows against 1: the spare split evenly. A ping every 50 ms in B
  # meanwhile: B is backlogged, so the ping's echo requests must leave ahead of its backlog
  # (sparse), as in a class without a ceil (sparse-ping-under-8flows).
  run_ok borrow-equal-5-5 shaperctl -n snd change-class --dev va0 --id 21 --ceil 20mbit &&
    run_ok borrow-equal-5-5 shaperctl -n snd change-class --dev va0 --id 22 --rate 5mbit || { bw_cleanup; return; }
  bw_b_start
  bw_wait_counting /tmp/bw-b.clock || { result FAIL borrow-equal-5-5 "B's flow never counted"; bw_cleanup; return; }
  sleep 1.5
  bw_status /tmp/bw-sp0.json
  nsx snd "${PING:-ping}" -n -i 0.05 -c 60 10.0.0.2 >/tmp/bw-ping.txt 2>&1 &
  _pp=$!
  bw_window 3
  wait "$_pp"
  bw_status /tmp/bw-sp1.json
  bw_phase borrow-equal-5-5 "$BW_FROM" "$BW_TO" 5 "A:/tmp/bw-a.clock:10e6" "B:/tmp/bw-b.clock:10e6"
  _r=$(grep -o 'time=[0-9.]*' /tmp/bw-ping.txt | cut -d= -f2)
  _n=$(echo "$_r" | grep -c . || true) _p99=$(echo "$_r" | p99)
  _sp=$(jq -n --slurpfile a /tmp/bw-sp0.json --slurpfile b /tmp/bw-sp1.json \
    '[$a[0].classes[], $b[0].classes[]] | map(select(.id == 22) | .sparse) | .[1] - .[0]' 2>/dev/null)
  _r="ping in B p50 $(echo "$_r" | sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }') ms, p99 ${_p99:-?} ms over $_n replies, ${_sp:-?} sparse packets in B meanwhile (bounds: every request sparse, p99 40 ms)"
  if [ "$_n" -ge 50 ] && [ "${_sp:-0}" -ge "$_n" ] && cond "${_p99:-1e9} <= 40"; then
    result PASS borrow-sparse-ping "$_r"
  else
    result FAIL borrow-sparse-ping "$_r"
  fi

  # (e) Priority: B (prio 0) is offered the spare before A (prio 1), whose 8 flows keep their rate.
  run_ok borrow-prio shaperctl -n snd change-class --dev va0 --id 21 --prio 1 || { bw_cleanup; return; }
  sleep 1.5
  bw_window 3
  bw_phase borrow-prio-b-first "$BW_FROM" "$BW_TO" 5 "A:/tmp/bw-a.clock:5e6" "B:/tmp/bw-b.clock:15e6"

  # The parent: within its rate in every window, and never faster on the device (which carries
  # only A and B from (a) on: judge.sh, the bound from (a)'s window on).
  _pa=$(calc "($_pa - $(head -n 1 /tmp/bw-p.clock | cut -d' ' -f1)) / 1e9")
  _k=$(clock_judge /tmp/bw-p.clock 20e6 "$_pa" "$(clock_now_s /tmp/bw-p.clock)" 5 "$_pa")
  bw_cleanup
  if echo "$BW_PARENT" | awk -F', ' '{ for (i = 1; i <= NF; i++) { n = split($i, w, " "); if (w[n] > 21) bad = 1 } } END { exit !bad }'; then
    result FAIL borrow-parent-20mbit "the parent counted over 20 Mbit/s +5 % in a window (Mbit/s: $BW_PARENT); the device by judge.sh: ${_k#*|}"
  elif [ "${_k%%|*}" = FAIL ]; then
    result FAIL borrow-parent-20mbit "the device by judge.sh: ${_k#*|}; windows (Mbit/s): $BW_PARENT"
  else
    result PASS borrow-parent-20mbit "at most 20 Mbit/s +5 % in every window (Mbit/s: $BW_PARENT); the device by judge.sh: ${_k#*|}"
  fi
}
