"""The Flink session cluster from the command line (as root: it makes network namespaces).

python -m flink_cluster fetch                # Flink's and Beam's parts into .tools/flink
python -m flink_cluster up                   # fetch, start; prints the Beam pipeline flags
python -m flink_cluster status               # the JobManager's REST overview and TaskManagers
python -m flink_cluster down                 # stop: nothing of the cluster is left running
python -m flink_cluster job-server-jar       # the path --flink_job_server_jar takes
python -m flink_cluster fat-job-server-jar   # the job server as one jar (built if missing), for
                                             # --flink_submit_uber_jar: its path
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

from flink_cluster import cluster, fetch, network


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m flink_cluster", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["fetch", "up", "down", "status", "job-server-jar", "fat-job-server-jar"])
    parser.add_argument("--image", default=cluster.DEFAULT_IMAGE, help="the sidecars' image (default %(default)s)")
    parser.add_argument(
        "--shared",
        action="append",
        metavar="DIR",
        help="a directory the client, TaskManagers and workers share at the same path (repeatable; "
        "default: the system temp dir and the project's outputs/ and data/)",
    )
    parser.add_argument("--prefix", default="flink", help="names the namespaces, links and containers")
    parser.add_argument("--subnet", default="10.89.7.0/24", help="the hosts' addresses (default %(default)s)")
    parser.add_argument(
        "--rehearsal-root",
        metavar="DIR",
        help="the SDK workers reach the stand-in Cloud Storage of the rehearsals kept in DIR (kubeflow_runner.py "
        "--rehearse --rehearsal-root, on the shared storage) as the rehearsed tasks do",
    )
    return parser.parse_args(argv)


def make_cluster(args: argparse.Namespace) -> cluster.Cluster:
    shared = tuple(str(Path(path).resolve()) for path in args.shared) if args.shared else cluster.default_shared()
    spec = cluster.Cluster(network.Network(args.prefix, args.subnet), image=args.image, shared=shared)
    if args.rehearsal_root:
        from rehearsal import flink  # the stand-ins' clients: only when asked for

        reach = flink.workers_environment(args.rehearsal_root, spec.network.gateway)
        spec = dataclasses.replace(spec, sidecar_env=tuple(reach.items()))
    return spec


def describe(spec: cluster.Cluster) -> str:
    hosts = ", ".join(f"{host.role} {host.address}" for host in spec.network.hosts)
    return "\n".join(
        [
            f"Flink {fetch.FLINK_VERSION} session cluster: {hosts}; REST http://{spec.master}",
            f"Beam {fetch.JOB_SERVER_BEAM_VERSION}'s Flink job server: {fetch.job_server_jar()}",
            f"shared storage (same paths everywhere): {', '.join(spec.shared)}",
            "Run the pipeline on it (its output root on the shared storage) with:",
            "  .venv/bin/python local_runner.py --output-root "
            + os.path.join(spec.shared[0], "flink-run")
            + f" --flink-master {spec.master} --flink-parallelism {spec.parallelism}"
            + f" --flink-job-server-jar {fetch.job_server_jar()} --flink-sdk-image {spec.image}",
            "or any Beam Python pipeline with:",
            "  " + " ".join(cluster.pipeline_flags(spec)),
            f"Logs: {spec.state / 'log'}; stop with: python -m flink_cluster down",
        ]
    )


def status(spec: cluster.Cluster) -> int:
    try:
        overview = cluster.rest(spec, "/overview")
        managers = cluster.rest(spec, "/taskmanagers")["taskmanagers"]
        jobs = cluster.rest(spec, "/jobs/overview")["jobs"]
    except OSError as error:
        print(f"no JobManager answers at http://{spec.master}: {error}", file=sys.stderr)
        return 1
    print(json.dumps(overview, indent=2))
    for manager in managers:
        print(f"TaskManager {manager['id']} at {cluster.taskmanager_address(manager)}: {manager['slotsNumber']} slots")
    for job in jobs:
        print(f"job {job['jid']} {job['name']}: {job['state']}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    spec = make_cluster(args)
    if args.command == "job-server-jar":
        print(fetch.job_server_jar())
    elif args.command == "fat-job-server-jar":
        print(fetch.fetch_fat_job_server(progress=lambda line: print(line, file=sys.stderr)))
    elif args.command == "fetch":
        started = time.monotonic()
        home, jar = fetch.fetch_all()
        print(f"Flink {fetch.FLINK_VERSION}: {home}\njob server: {jar}\n({time.monotonic() - started:.0f} s)")
    elif args.command == "up":
        fetch.fetch_all()
        started = time.monotonic()
        cluster.up(spec)
        print(describe(spec) + f"\n(up in {time.monotonic() - started:.0f} s)")
    elif args.command == "down":
        cluster.down(spec)
        left = cluster.leftovers(spec)
        print(f"left running: {', '.join(left)}" if left else "cluster stopped: nothing left")
        return 1 if left else 0
    else:
        return status(spec)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (cluster.ClusterError, fetch.FetchError, network.NetworkError, cluster.podman.PodmanError) as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)
