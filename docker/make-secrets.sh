#!/usr/bin/env bash
# Make the compose cluster's credentials: a store with a CA and the broker's certificate
# (for the name `broker`), and a principal for every service, each secret in its own file.
#
#   bash docker/make-secrets.sh [DIR]       (default: docker/secrets; needs `drfmesos`)
#
# Nothing secret goes into the image: the compose file mounts these files read-only. The
# directory is private (0700); the files in it are readable by the containers' own users.
set -euo pipefail
cd "$(dirname "$0")"
DIR=${1:-secrets}
if [ -e "$DIR/principals.json" ]; then
  echo "$DIR already holds a credentials store; remove it to start over" >&2
  exit 1
fi
drfmesos auth init "$DIR" --hostname broker >/dev/null
add() { drfmesos auth add "$DIR" "$1" --kind "$2" --secret-file >/dev/null 2>&1; }
add master master
for s in slave-1 slave-2 slave-3; do add "$s" slave; done
for f in A B C; do add "$f" framework; done
add operator operator              # you, on the host: drfmesos state / teardown
add health-broker operator         # the health checks
add health-master operator
# the masters' ZooKeeper credentials (digest): the registry's and the election's nodes are
# theirs alone; a file, so that the password is on no command line
python3 -c 'import secrets; print(f"zk://master:{secrets.token_urlsafe(24)}@zookeeper:2181/drfmesos")' \
  >"$DIR/zk"
# the containers run as their own users: let them read what is mounted into them
chmod 0644 "$DIR"/passwd "$DIR"/acl "$DIR"/broker.key "$DIR"/framework-ids.key "$DIR"/zk "$DIR"/secrets/*
echo "credentials in $(cd "$DIR" && pwd) (CA: ca.pem; your operator secret: secrets/operator)"
