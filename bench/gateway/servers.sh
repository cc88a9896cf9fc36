# The two servers the gateway benchmarks compare, configured alike; `source`
# it after bench/lib.sh with $work, $threads and $up_port set.
#
# write_sluice_config FILE: Sluice on $sl_port (admin $admin_port, decision
# API $dec_port) in front of the upstream, $threads workers, and $sluice_tls
# (a `tls:` line, or empty):
#   GET /pass  a limit far above the load: every request is proxied
#   GET /deny  1 per hour: 429 after the first
write_sluice_config() {
  cat >"$1" <<EOF
listen: 127.0.0.1:$sl_port
admin: 127.0.0.1:$admin_port
upstream: http://127.0.0.1:$up_port
${sluice_tls:-}
decision_api:
  listen: 127.0.0.1:$dec_port
headers: [legacy]
server:
  threads: $threads
logging:
  level: warn
routes:
  - match: GET /pass
    limits: [{capacity: 1000000000, refill_rate: 1000000000/s}]
  - match: GET /deny
    limits: [{capacity: 1, refill_rate: 1/h}]
EOF
}

# For TLS, $nginx_ssl and $nginx_tls are set (empty for plain HTTP).
# start_nginx NAME PORT LOG_LEVEL: writes $work/NAME/nginx.conf and starts
# nginx with it in the background ($! is its master). One worker per Sluice
# worker, no access log, the same upstream with kept-alive connections:
#   /pass     limit_req far above the load, proxied
#   /deny     limit_req 1 per minute, nodelay: 429 after the first
#   /v1/auth  return 204: the least nginx can do to answer a request, the
#             counterpart of Sluice's decision endpoint
# LOG_LEVEL is limit_req_log_level under `error_log warn`: `info` (at its
# best: rejections not written) or `warn` (a line per rejection).
start_nginx() {
  local name=$1 port=$2 level=$3 dir="$work/$1" user_line=""
  [[ $(id -u) == 0 ]] && user_line="user $(id -un);"
  mkdir -p "$dir"
  cat >"$dir/nginx.conf" <<EOF
$user_line
worker_processes $threads;
error_log $dir/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $dir/body;
  proxy_temp_path $dir/proxy;
  fastcgi_temp_path $dir/fastcgi;
  uwsgi_temp_path $dir/uwsgi;
  scgi_temp_path $dir/scgi;
  limit_req_zone \$binary_remote_addr zone=pass:10m rate=1000000r/s;
  limit_req_zone \$binary_remote_addr zone=deny:10m rate=1r/m;
  limit_req_status 429;
  limit_req_log_level $level;
  ${nginx_tls:-}
  upstream app {
    server 127.0.0.1:$up_port;
    keepalive 64;
  }
  server {
    listen 127.0.0.1:$port${nginx_ssl:-};
    location /pass {
      limit_req zone=pass burst=1000 nodelay;
      proxy_pass http://app;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
    }
    location /deny {
      limit_req zone=deny nodelay;
      proxy_pass http://app;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header X-Forwarded-For \$proxy_add_x_forwarded_for;
    }
    location = /v1/auth {
      return 204;
    }
  }
}
EOF
  nginx -p "$dir/" -c "$dir/nginx.conf" -g "daemon off; pid $dir/nginx.pid;" 2>"$dir/stderr.log" &
}
