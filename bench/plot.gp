# Latency percentiles and throughput versus watcher count, kwatch vs etcd.
# Called by bench/run: gnuplot -e "datadir='DIR'; out='FILE.png'; subtitle='...'" bench/plot.gp
# Data files (one row per watcher count):
#   latency_<t>.dat: watchers p50_ms p99_ms p999_ms events_per_s writes_per_s   (500 writes/s)
#   fanout_<t>.dat:  watchers events_per_s p99_ms writes_per_s                  (saturation)
set terminal pngcairo size 1100,900 noenhanced font ",10"
set output out
set multiplot layout 2,1 title subtitle
set logscale x
set xlabel "watchers"
set grid
set key outside right
set lmargin 12
set rmargin 36

set title "write ack -> event latency at 500 writes/s (1 KiB configmaps; 0.01 = event arrived before the ack)"
set logscale y
set yrange [0.01:*]
set ylabel "ms (log)"
plot datadir."/latency_kwatch.dat" using 1:2 with linespoints lc rgb "#1f77b4" pt 7 title "kwatch p50", \
     ""                            using 1:3 with linespoints lc rgb "#1f77b4" pt 5 dt 2 title "kwatch p99", \
     ""                            using 1:4 with linespoints lc rgb "#1f77b4" pt 9 dt 3 title "kwatch p999", \
     datadir."/latency_etcd.dat"   using 1:2 with linespoints lc rgb "#d62728" pt 7 title "etcd p50", \
     ""                            using 1:3 with linespoints lc rgb "#d62728" pt 5 dt 2 title "etcd p99", \
     ""                            using 1:4 with linespoints lc rgb "#d62728" pt 9 dt 3 title "etcd p999"

set title "events delivered per second (all watchers together)"
set yrange [*:*]
set ylabel "events/s (log)"
plot datadir."/fanout_kwatch.dat"  using 1:2 with linespoints lc rgb "#1f77b4" pt 7 title "kwatch, writers at saturation", \
     datadir."/fanout_etcd.dat"    using 1:2 with linespoints lc rgb "#d62728" pt 7 title "etcd, writers at saturation", \
     datadir."/latency_kwatch.dat" using 1:5 with linespoints lc rgb "#1f77b4" pt 5 dt 2 title "kwatch, 500 writes/s", \
     datadir."/latency_etcd.dat"   using 1:5 with linespoints lc rgb "#d62728" pt 5 dt 2 title "etcd, 500 writes/s"
unset multiplot
