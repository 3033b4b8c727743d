#!/bin/sh
# Print the Secret holding the NATS passwords (random, hex so they are safe inside nats:// URLs)
# for the prod overlay, which generates none so that no password sits in git:
#   deploy/k8s/make-secret.sh | kubectl apply -f -
# Run it once: a second run rotates every password (restart nats and the services after that).
# The operator's password, for `treegrpo` commands from outside the cluster:
#   kubectl -n treegrpo get secret treegrpo-nats-users -o jsonpath='{.data.operator}' | base64 -d
set -eu
pw() { od -An -N24 -tx1 /dev/urandom | tr -d ' \n'; }
exec kubectl create secret generic treegrpo-nats-users --namespace treegrpo \
  --from-literal=sampler="$(pw)" --from-literal=executor="$(pw)" --from-literal=grader="$(pw)" \
  --from-literal=learner="$(pw)" --from-literal=operator="$(pw)" --from-literal=sys="$(pw)" \
  --dry-run=client -o yaml
