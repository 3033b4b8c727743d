#!/bin/sh
# Print a deploy/.env for docker compose: one random NATS password per user (hex, so it is safe
# inside nats://user:password@host URLs), and where the models live.
#   deploy/gen-env.sh > deploy/.env
set -eu
pw() { od -An -N24 -tx1 /dev/urandom | tr -d ' \n'; }
for user in SAMPLER EXECUTOR GRADER LEARNER OPERATOR SYS; do
  echo "TG_${user}_PASSWORD=$(pw)"
done
echo "# Host folder holding base/, the transformers model the sampler and the learner load"
echo "TREEGRPO_MODELS=${TREEGRPO_MODELS:-./data/models}"
