"""Run the simulator by hand: `python -m tests.k8s_sim --data /path/to/public` prints its URL; then
`treegrpo serve executor --set backend=k8s --set k8s.api_url=<url> --set k8s.python=python3`."""

from __future__ import annotations

import argparse
import time

from tests.k8s_sim import K8sSim


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data", default="", help="local folder standing for the pods' hostPath data volume")
    ap.add_argument("--host-path", default="/data/treegrpo/public", help="hostPath the executor's pods name")
    args = ap.parse_args()
    sim = K8sSim(host_paths={args.host_path: args.data} if args.data else {}).start()
    print(sim.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        sim.stop()


if __name__ == "__main__":
    main()
