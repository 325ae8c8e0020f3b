#!/usr/bin/env bash
# Regenerates the test CAs and server certificates (valid for 100 years) with openssl:
#   ca.pem / ca.key               the test CA ("heartbeat-agent test CA")
#   server.pem / server.key       127.0.0.1, ::1 and localhost, signed by the test CA
#   other-ca.pem                  a CA nobody trusts; other-server.pem/.key signed by it
#   expired-ca.pem                a third CA; expired-server.pem/.key signed by it, valid only
#                                 on 2001-01-01 (made with faketime)
set -euo pipefail
cd "$(dirname "$0")"
days=36500
ext=$(mktemp); trap 'rm -f "$ext"' EXIT
printf 'subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n' >"$ext"
for name in ca other-ca expired-ca; do
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days "$days" \
    -subj "/CN=heartbeat-agent test $name" -keyout "$name.key" -out "$name.pem" 2>/dev/null
done
sign() { # sign <server-name> <ca-name> [days]
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=localhost" \
    -keyout "$1.key" -out "$1.csr" 2>/dev/null
  openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial -days "${3:-$days}" \
    -extfile "$ext" -out "$1.pem" 2>/dev/null
  rm -f "$1.csr"
}
sign server ca
sign other-server other-ca
faketime '2001-01-01 00:00:00' bash -c "$(declare -f sign); ext=$ext days=$days; sign expired-server expired-ca 1"
rm -f ./*.srl ca.key other-ca.key expired-ca.key
