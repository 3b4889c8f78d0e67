#!/usr/bin/env bash
# Local single-node Apache Kafka (KRaft broker+controller) from Maven Central jars. No Docker.
#
#   deploy/kafka/kafka.sh install   resolve the jars with Maven (idempotent)
#   deploy/kafka/kafka.sh start     format storage if needed, start, wait until it accepts connections
#   deploy/kafka/kafka.sh stop      stop the broker started from this directory
#   deploy/kafka/kafka.sh status    exit 0 if running and reachable
#   deploy/kafka/kafka.sh restart
#
# Environment:
#   RB_KAFKA_PORT        client listener on 127.0.0.1 (default 9092)
#   RB_KAFKA_CTRL_PORT   controller listener (default RB_KAFKA_PORT+1)
#   RB_KAFKA_DIR         data dir, logs and pid file (default <repo>/.local/kafka-<port>)
#   RB_KAFKA_HEAP        JVM heap (default 512m)
#   RB_KAFKA_LIBS        where the broker jars are resolved to (default <this dir>/target/libs)
#   RB_KAFKA_START_TIMEOUT seconds to wait for the port (default 60)
#   RB_KAFKA_SASL_PORT   also open a SASL_PLAINTEXT listener on 127.0.0.1 here (PLAIN,
#                        SCRAM-SHA-256, SCRAM-SHA-512); off when unset
#   RB_KAFKA_SASL_USERS  user:password[,user:password] accepted on it (SCRAM credentials are
#                        written at format time, so set this before the first start)
#   RB_KAFKA_AUTHORIZER  set to 1: enforce ACLs (KRaft's StandardAuthorizer; nothing is allowed
#                        without an ACL); principals on the SASL and SSL listeners get only what
#                        ACLs grant them (`rb-streams tenants add`). Without SSL the PLAINTEXT and
#                        controller listeners (127.0.0.1 only) are the super user User:ANONYMOUS
#                        (the worker and admin tools of a local setup). With SSL there is no
#                        ANONYMOUS super user: the controller and inter-broker traffic go over
#                        TLS with the broker's certificate (User:rb-broker), the admin is
#                        <dir>/tls/admin.pem (User:rb-admin), and PLAINTEXT clients get nothing
#   RB_KAFKA_SSL_PORT    also open an SSL (TLS) listener on 127.0.0.1 here. On first start openssl
#                        makes a local CA (<dir>/tls/ca.pem: clients' RB_SSL_CAFILE), the broker's
#                        certificate for 127.0.0.1/localhost and two client certificates it
#                        issues: admin.pem/admin.key (User:rb-admin) and client.pem/client.key
#                        (User:rb-client; RB_SSL_CERTFILE/RB_SSL_KEYFILE). The listener requires a
#                        client certificate from that CA (ssl.client.auth=required): a client
#                        without one cannot connect. Off when unset
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
PORT="${RB_KAFKA_PORT:-9092}"
CTRL_PORT="${RB_KAFKA_CTRL_PORT:-$((PORT + 1))}"
DIR="${RB_KAFKA_DIR:-$REPO/.local/kafka-$PORT}"
HEAP="${RB_KAFKA_HEAP:-512m}"
TIMEOUT="${RB_KAFKA_START_TIMEOUT:-60}"
SASL_PORT="${RB_KAFKA_SASL_PORT:-}"
SASL_USERS="${RB_KAFKA_SASL_USERS:-}"
SSL_PORT="${RB_KAFKA_SSL_PORT:-}"
AUTHORIZER="${RB_KAFKA_AUTHORIZER:-}"
LIBS="${RB_KAFKA_LIBS:-$HERE/target/libs}"  # where Maven puts the jars (an installed package: a user cache dir)
PIDFILE="$DIR/kafka.pid"

log() { echo "[kafka.sh] $*" >&2; }

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

install() {
  if ls "$LIBS"/kafka_2.13-*.jar >/dev/null 2>&1; then return 0; fi
  command -v mvn >/dev/null || { log "Maven (mvn) is required to fetch the broker jars"; exit 2; }
  command -v java >/dev/null || { log "Java 17+ is required to run the broker"; exit 2; }
  log "resolving Kafka jars with Maven"
  # -B and style.color=never ask for no colour, yet Maven 3.8 with -q still writes bare ESC[0m
  # resets on both streams: strip every escape sequence (and the lines left empty); pipefail
  # keeps Maven's exit status
  mvn -q -B -Dstyle.color=never -f "$HERE/pom.xml" dependency:copy-dependencies \
      -DoutputDirectory="$LIBS" -DincludeScope=runtime 2>&1 | no_escapes >&2
}

no_escapes() { sed -u -e 's/\x1b\[[0-9;]*[A-Za-z]//g' -e '/^[[:space:]]*$/d'; }

running_pid() {
  [ -f "$PIDFILE" ] || return 1
  local pid; pid="$(cat "$PIDFILE")"
  kill -0 "$pid" 2>/dev/null || return 1
  echo "$pid"
}

write_config() {
  mkdir -p "$DIR/data" "$DIR/logs"
  local listeners="PLAINTEXT://127.0.0.1:$PORT" advertised="PLAINTEXT://127.0.0.1:$PORT"
  local ctrl_protocol=PLAINTEXT inter=PLAINTEXT
  # with the authorizer and TLS, the broker's own traffic is authenticated by its certificate
  if [ -n "$SSL_PORT" ] && [ "$AUTHORIZER" = "1" ]; then ctrl_protocol=SSL inter=SSL; fi
  local protocols="PLAINTEXT:PLAINTEXT,CONTROLLER:$ctrl_protocol"
  if [ -n "$SASL_PORT" ]; then
    listeners="$listeners,SASL_PLAINTEXT://127.0.0.1:$SASL_PORT"
    advertised="$advertised,SASL_PLAINTEXT://127.0.0.1:$SASL_PORT"
    protocols="$protocols,SASL_PLAINTEXT:SASL_PLAINTEXT"
  fi
  if [ -n "$SSL_PORT" ]; then
    make_tls
    listeners="$listeners,SSL://127.0.0.1:$SSL_PORT"
    advertised="$advertised,SSL://127.0.0.1:$SSL_PORT"
    protocols="$protocols,SSL:SSL"
  fi
  cat > "$DIR/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$CTRL_PORT
listeners=$listeners,CONTROLLER://127.0.0.1:$CTRL_PORT
advertised.listeners=$advertised
listener.security.protocol.map=$protocols
controller.listener.names=CONTROLLER
inter.broker.listener.name=$inter
log.dirs=$DIR/data
num.partitions=1
auto.create.topics.enable=false
offsets.topic.replication.factor=1
offsets.topic.num.partitions=8
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=8
group.initial.rebalance.delay.ms=0
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
log.retention.hours=24
PROPS
  if [ -n "$SASL_PORT" ]; then
    local plain_users="" pair
    IFS=',' read -ra pairs <<< "$SASL_USERS"
    for pair in "${pairs[@]}"; do
      [ -n "$pair" ] && plain_users="$plain_users user_${pair%%:*}=\"${pair#*:}\""
    done
    cat >> "$DIR/server.properties" <<PROPS
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required$plain_users;
listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
PROPS
  fi
  if [ "$AUTHORIZER" = "1" ]; then
    local supers="User:ANONYMOUS"  # PLAINTEXT on 127.0.0.1: the local worker and admin tools
    [ -n "$SSL_PORT" ] && supers="User:rb-broker;User:rb-admin"  # certificates, never ANONYMOUS
    cat >> "$DIR/server.properties" <<PROPS
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=false
super.users=$supers
PROPS
  fi
  if [ -n "$SSL_PORT" ]; then
    local name
    for name in ssl $([ "$ctrl_protocol" = SSL ] && echo controller); do
      cat >> "$DIR/server.properties" <<PROPS
listener.name.$name.ssl.keystore.type=PKCS12
listener.name.$name.ssl.keystore.location=$DIR/tls/broker.p12
listener.name.$name.ssl.keystore.password=rb-local-tls
listener.name.$name.ssl.key.password=rb-local-tls
listener.name.$name.ssl.truststore.type=PEM
listener.name.$name.ssl.truststore.location=$DIR/tls/ca.pem
listener.name.$name.ssl.client.auth=required
PROPS
    done
    # a certificate's principal is its CN: User:rb-client, not User:CN=rb-client
    echo 'ssl.principal.mapping.rules=RULE:^CN=([^,]+)$/$1/,DEFAULT' >> "$DIR/server.properties"
  fi
}

# A local CA, the broker's certificate (keystore for the SSL listener) and two client
# certificates it issues (admin: a super user under the authorizer; client: ACLs only).
make_tls() {
  local tls="$DIR/tls"
  [ -f "$tls/broker.p12" ] && [ -f "$tls/ca.pem" ] && [ -f "$tls/client.pem" ] && [ -f "$tls/admin.pem" ] && return 0
  command -v openssl >/dev/null || { log "openssl is required for RB_KAFKA_SSL_PORT"; exit 2; }
  mkdir -p "$tls"
  chmod 700 "$tls"
  rm -f "$tls"/*
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=rb-local-ca" \
    -addext "basicConstraints=critical,CA:true" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -keyout "$tls/ca.key" -out "$tls/ca.pem" 2>/dev/null
  issue "$tls" broker "subjectAltName=IP:127.0.0.1,DNS:localhost
extendedKeyUsage=serverAuth,clientAuth"
  issue "$tls" admin "extendedKeyUsage=clientAuth"
  issue "$tls" client "extendedKeyUsage=clientAuth"
  openssl pkcs12 -export -in "$tls/broker.pem" -inkey "$tls/broker.key" -certfile "$tls/ca.pem" \
    -name broker -out "$tls/broker.p12" -passout pass:rb-local-tls
  rm -f "$tls/ca.key" "$tls/broker.key" "$tls/ca.srl"  # nothing signs again; the keystore holds the broker's key
  log "made a local CA and certificates in $tls (ca.pem; client.pem/client.key, admin.pem/admin.key)"
}

# issue DIR NAME EXTENSIONS: NAME.key and NAME.pem (CN=rb-NAME) signed by DIR/ca.key.
issue() {
  local tls="$1" name="$2"
  openssl req -newkey rsa:2048 -nodes -subj "/CN=rb-$name" -keyout "$tls/$name.key" -out "$tls/$name.csr" 2>/dev/null
  openssl x509 -req -days 3650 -in "$tls/$name.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" -CAcreateserial \
    -extfile <(printf '%s\n' "$3") -out "$tls/$name.pem" 2>/dev/null
  rm -f "$tls/$name.csr"
  chmod 600 "$tls/$name.key"
}

JAVA=(java "-Xms${HEAP}" "-Xmx${HEAP}" -XX:+UseG1GC -Djava.awt.headless=true
      "-Dkafka.logs.dir=$DIR/logs" "-Dlog4j2.configurationFile=$HERE/log4j2.yaml" -cp "$LIBS/*")

format() {
  [ -f "$DIR/data/meta.properties" ] && return 0
  local cid
  cid="$("${JAVA[@]}" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)"
  log "formatting KRaft storage in $DIR/data (cluster $cid)"
  local scram=() pair
  if [ -n "$SASL_PORT" ]; then
    IFS=',' read -ra pairs <<< "$SASL_USERS"
    for pair in "${pairs[@]}"; do
      [ -n "$pair" ] || continue
      scram+=(--add-scram "SCRAM-SHA-256=[name=${pair%%:*},password=${pair#*:}]")
      scram+=(--add-scram "SCRAM-SHA-512=[name=${pair%%:*},password=${pair#*:}]")
    done
  fi
  "${JAVA[@]}" kafka.tools.StorageTool format -t "$cid" -c "$DIR/server.properties" "${scram[@]}" >"$DIR/logs/format.log" 2>&1 \
    || { cat "$DIR/logs/format.log" >&2; exit 1; }
}

start() {
  install
  if pid="$(running_pid)"; then log "already running (pid $pid) on 127.0.0.1:$PORT"; return 0; fi
  if port_open "$PORT"; then log "port $PORT is taken by another process"; exit 1; fi
  if [ -n "$SASL_PORT" ] && port_open "$SASL_PORT"; then log "port $SASL_PORT is taken by another process"; exit 1; fi
  if [ -n "$SSL_PORT" ] && port_open "$SSL_PORT"; then log "port $SSL_PORT is taken by another process"; exit 1; fi
  write_config
  format
  local t0; t0="$(date +%s.%N)"
  # setsid: the broker survives the shell that started it and gets its own process group
  setsid "${JAVA[@]}" kafka.Kafka "$DIR/server.properties" >"$DIR/logs/stdout.log" 2>&1 < /dev/null &
  echo $! > "$PIDFILE"
  local waited=0
  until port_open "$PORT"; do
    if ! running_pid >/dev/null; then log "broker exited; see $DIR/logs"; tail -n 30 "$DIR/logs/stdout.log" "$DIR/logs/server.log" >&2 || true; exit 1; fi
    sleep 0.2; waited=$((waited + 1))
    if [ "$waited" -gt $((TIMEOUT * 5)) ]; then log "timed out after ${TIMEOUT}s"; stop; exit 1; fi
  done
  # The port opens before the broker has caught up with the metadata log; wait for that line too.
  for _ in $(seq 1 $((TIMEOUT * 5))); do
    grep -q "Kafka Server started\|\[KafkaRaftServer nodeId=1\] Kafka Server started" "$DIR/logs/server.log" 2>/dev/null && break
    sleep 0.2
  done
  log "started pid $(cat "$PIDFILE") on 127.0.0.1:$PORT${SASL_PORT:+ (SASL_PLAINTEXT on $SASL_PORT)} in $(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $t0}")s (data: $DIR)"
}

stop() {
  local pid
  if ! pid="$(running_pid)"; then log "not running"; rm -f "$PIDFILE"; return 0; fi
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  if kill -0 "$pid" 2>/dev/null; then log "forcing stop"; kill -9 "$pid" 2>/dev/null || true; fi
  rm -f "$PIDFILE"
  log "stopped"
}

status() {
  if pid="$(running_pid)" && port_open "$PORT"; then echo "running pid $pid on 127.0.0.1:$PORT"; return 0; fi
  echo "not running"; return 1
}

case "${1:-}" in
  install) install ;;
  start) start ;;
  stop) stop ;;
  restart) stop; start ;;
  status) status ;;
  *) echo "usage: $0 {install|start|stop|restart|status}" >&2; exit 2 ;;
esac
