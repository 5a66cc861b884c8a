"""The rule table: the verdict's rules, in the order an on-call engineer reasons, as data.

Each row is a ``Rule`` (``rules.base``): an id, its family (one module each: ``deaths``,
``motion``, ``graph``, ``peers``, ``locks``, ``doors``), the states it can give, what it needs,
why it outranks the rows after it, and its ``decide`` function - and documents itself: what it
detects and the cause (``doc``) and the recorded captures it decides (``examples``), from which
docs/rules.md is generated (``python docs/make_rules.py``). The first row that decides,
decides; every later row is still asked, so the verdict records which would also have matched
and why each was overruled (``Verdict.also_matched``): whoever adds a row sees its effect on
every recorded capture in one fast test (``tests/test_rule_table.py``).

Rules only decide (the state, how sure, whom to blame); the sentences they give - a verdict's
summary, a suspect's reason, why a row outranks the rows after it, a problem line - are
``rules.words``' functions and constants, one per sentence, so the wording is read, reviewed
and changed in one place. The longer stories (``diag.verdict.stories``, ``pipe_story``, a
filesystem's and a self-wait's story) are told by the modules that find them.

A row that raises is recorded as a problem (``Verdict.problems``) and skipped, never fatal: a
bug in one rule must not cost the verdict. A row that needs the wait-for graph is skipped when
the graph could not be drawn (recorded by the classifier).

May import the base and ``diag.verdict`` only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple

from diag.model import RuleMatch
from diag.verdict.rules import (
    deaths,
    doors,
    flow,
    graph,
    locks,
    machine,
    motion,
    peers,
    words,
    words_joins,
    words_output,
)
from diag.verdict.rules.base import Decision, Rule, rule
from diag.verdict.rules.words_flow import FLOW_OUTRANKS
from diag.verdict.rules.words_phases import (
    LONE_PHASE_OUTRANKS,
    MEMORY_OUTRANKS,
    SILENCE_OUTRANKS,
)
from diag.verdict.rules.words_polls import FUTILE_POLL_OUTRANKS, SELF_WAKE_OUTRANKS
from diag.verdict.rules.words_quiet import (
    DEAD_LINK_OUTRANKS,
    OWED_OUTRANKS,
    QUIET_PEER_OUTRANKS,
)
from diag.verdict.rules.words_server_lock import SERVER_LOCK_OUTRANKS
from diag.verdict.rules.words_spin import (
    BLOCK_DEAD_OUTRANKS,
    SPIN_ALONE_OUTRANKS,
    SPIN_DEAD_OUTRANKS,
)
from diag.verdict.situation import Situation

TABLE: Tuple[Rule, ...] = (
    rule(
        "rank_died",
        "deaths",
        ["deadlocked"],
        deaths.rank_died,
        words.DIED_OUTRANKS,
        doc="""A rank of the job is dead (a zombie, or gone with its exit recorded) while its
        peers are still there and nothing progresses. They wait in a collective or a
        rendezvous for a party that will never come: the job hangs until a timeout, and the
        dead rank (its exit code, the OOM killer, a crash) is the cause.""",
        examples=["gloo_rank_dies", "vllm_tp2_worker_killed", "zombie_rank", "loader_stall_clock"],
    ),
    rule(
        "rank_stopped",
        "deaths",
        ["deadlocked"],
        deaths.rank_stopped,
        words.STOP_OUTRANKS,
        doc="""A process of the job is stopped (state T: SIGSTOP, a debugger, a tracer, a
        frozen cgroup) in every sample. It ends no wait until it is resumed, so every peer
        that waits on it is stuck behind it; the remedy depends on who holds it (``kill
        -CONT``, detach the tracer, thaw the cgroup).""",
        examples=["vllm_engine_sigstop", "sglang_real_scheduler_sigstop"],
    ),
    rule(
        "log_names_dead_rank",
        "deaths",
        ["deadlocked"],
        deaths.log_names_dead_rank,
        words.DEATH_LINE_OUTRANKS,
        doc="""The job's own log names a rank that died (torchrun's ``local_rank: N (pid:
        P)``, vLLM's "Worker proc ... died unexpectedly") and no live process is that rank any
        more, while other ranks are there. Its launcher reaped it before diag looked, so only
        the log line is left; the ranks still burning CPU spin or tear down because of it.
        A death line from before an elastic restart, or in a job that progresses, is
        history and does not count.""",
        examples=["launcher_lost_rank"],
    ),
    rule(
        "store_host_died",
        "deaths",
        ["deadlocked"],
        deaths.store_host_died,
        words_joins.HOST_DIED_OUTRANKS,
        doc="""Ranks in ``init_process_group`` connect to a c10d store no process of the
        capture listens on, and the capture holds evidence that the store's host, rank 0,
        died: its traceback in a followed log (lines its launcher tagged ``[rank0]:``), a line
        giving its non-zero exit status, or - on a loopback MASTER_ADDR - no process being
        rank 0 while the joiners' launcher has reaped a child that ran. Death outranks the
        door: the wait looks like "the master is late", but it will never come. Without such
        evidence ``waits_for_nodes_to_join`` reads idle and says which evidence would tell.""",
        examples=["store_host_crashed"],
    ),
    rule(
        "gpu_failed",
        "deaths",
        ["deadlocked"],
        deaths.gpu_failed,
        words.GPU_FAILED_OUTRANKS,
        doc="""A GPU held by a process of the job reported XID 79 (it fell off the bus) or XID
        95 (an uncontained ECC error) during the capture, or NVML reports it lost. The rank
        on it cannot go on - its CUDA calls fail or spin on a device that is gone - and its
        peers wait for it in their collectives until a timeout: a death, not a slow rank.
        The GPU needs a reset or service; drain the node and restart the job without it.
        (No GPU here: the example is a bundle the test helpers build, as NVML reports it.)""",
        examples=["fixture:gpu_fell_off_bus"],
    ),
    rule(
        "waits_on_itself",
        "locks",
        ["deadlocked"],
        locks.waits_on_itself,
        words.SELF_LOCK_OUTRANKS,
        doc="""A thread blocks on a lock that a frame lower on its own stack already holds
        (re-entered through a signal handler, a finalizer, a GC callback or a logging
        handler), or puts into a full queue that only it drains. No other thread can release
        it; a timer firing beside it had made the process look idle.""",
        examples=["explore_bounded_queue_self_put"],
    ),
    rule(
        "blocked_on_itself",
        "locks",
        ["deadlocked"],
        locks.blocked_on_itself,
        words.NEVER_WAKES_OUTRANKS,
        doc="""Every thread of a process waits, untimed, on a private futex (its own locks,
        events, queues) and none of them runs, so none will ever release the others: a lock
        left held by a thread that died, an event only a dead consumer sets. No peer, port or
        timer can help it.""",
        examples=["abandoned_lock"],
    ),
    rule(
        "cpu_held_back",
        "machine",
        ["slow"],
        machine.cpu_held_back,
        words.CPU_HELD_OUTRANKS,
        ["deltas"],
        doc="""A rank is runnable in most samples and the kernel keeps it from the CPU: its
        cgroup's CPU limit throttled it in at least half of its scheduling periods (a pod's
        ``limits.cpu`` of a few hundredths of a core), or it waited on a run queue half the
        time at nice 10 or more (SCHED_BATCH, SCHED_IDLE) beside busier processes. Its
        peers wait for it in their collectives and its log is silent for seconds, which read
        as a diverged, deadlocked rank; it runs its own code, slowly. Raise the limit or give
        it a CPU; killing the job would not help. The row also takes the place of any
        deadlocked decision whose suspect the kernel reports runnable and that moved during
        the capture (its run-queue delay grew faster than its CPU time, or its stack changed
        while it ran in no wait or poll loop): runnable is not blocked, whatever the cause.""",
        examples=["gloo_cpu_quota"],
    ),
    rule(
        "memory_pressure",
        "machine",
        ["slow"],
        machine.memory_pressure,
        MEMORY_OUTRANKS,
        ["deltas"],
        doc="""A rank faults its pages back in (major faults, 20 a second or more) or waits in
        reclaim or compaction (its wait channel) while its memory cgroup sits at 90 % of its
        limit with limit events growing (v1 ``failcnt``, v2 ``memory.events`` high/max), or
        memory pressure (v2 group, ``/proc/pressure/memory``) is 10 % or more: it is under
        memory pressure - its page cache and mappings are evicted and read back as fast as it
        runs, its log goes quiet, it reads as a rank doing nothing. Slow, with the figures
        (``diag.verdict.memory``); raise the limit or make it hold less. A loader faulting in
        its weights with room to spare is its load, not pressure; an OOM kill in evidence is a
        death (the rows above).""",
        examples=["memory_cgroup_thrash"],
    ),
    rule(
        "requests_pile_up",
        "locks",
        ["deadlocked"],
        locks.requests_pile_up,
        words_output.PILE_UP_OUTRANKS,
        ["deltas"],
        doc="""Threads accumulate across samples on one lock (more at the last sample than
        at the first, at least 3; or a full pool: 3 or more in every sample), all in the same
        frame, while a thread further down that
        frame - the lock's holder - waits untimed for an event, a queue item or a condition,
        and no thread of the process works in any sample: nothing will set what the holder
        waits for (its setter died - a logged "Exception in thread" traceback is quoted). A
        wedged threaded server: its accept loop runs, its health endpoint may answer, its
        clients' timeouts move its log; every new request thread joins the pile. Restart
        it, and fix what was to set the event.""",
        examples=["http_wedged_pileup"],
    ),
    rule(
        "output_reports_failure",
        "motion",
        ["deadlocked", "slow"],
        motion.output_reports_failure,
        words_output.FAILURES_OUTRANK,
        ["deltas"],
        doc="""The job's only moving output is failure - timeouts, cancellations, retries,
        refused connections, failed health checks, 4xx/5xx access lines, tracebacks, a
        framework's own "cancelling request" or "no replica available" (its pack's
        ``failure_lines``) - with no completion beside it, and nothing else moves or works.
        A job that narrates its own failure is stuck, not progressing: with threads blocked on
        a lock in every sample, deadlocked on what its failures name; with nothing blocked
        and no peer or lock wait (a retry loop backing off), slow - it goes on when what it
        calls answers. The failure rate is in the sentence ("12 failures in 6 s (12
        timeouts), none completed"); failures beside completions stay progressing
        (``output_moves``) with that rate. A save retried on a full disk writes bytes each
        try before the kernel refuses ("No space left on device", a quota, a read-only
        mount): a process whose log says only that is no writer of output - slow, with the
        remedy (free space; killing it loses what it tries to save). So is a process whose
        log says only that what it does failed and is retried: its bytes are failed tries, no
        phase a rank is alone in (``alone_in_phase``) - with peers waiting, the retry's own
        rows decide (a back-off, or the same retry again and again: diverged).""",
        examples=["retry_until_answers", "batch_timeouts_lock", "ckpt_save_disk_full"],
    ),
    rule(
        "answers_requests",
        "motion",
        ["progressing"],
        motion.answers_requests,
        words.ANSWERS_OUTRANKS,
        needs=["deltas"],
        doc="""Bytes flow on the connections to a server's listening ports between samples:
        it answers its clients. Socket traffic does not show in ``/proc/PID/io`` and servers
        often log nothing per request, so this is the only sign of a busy server whose
        threads sit in epoll between requests. A thread-per-request server that closes each
        connection after a few ms holds none at any sample: the connections it closed
        between samples, in most intervals (TIME_WAIT on its port, younger than the gap),
        are its answers (``diag.verdict.short_requests``) - unless all the server logged of
        its accesses were health checks or metrics scrapes: then those are what came and
        went, which a server with every worker wedged answers too.""",
        examples=["uvicorn_busy_no_log", "threaded_server_short_requests"],
    ),
    rule(
        "alone_in_phase",
        "motion",
        ["slow"],
        motion.alone_in_phase,
        LONE_PHASE_OUTRANKS,
        ["deltas"],
        doc="""One rank (or a few, fewer than half) writes while every other rank waits for it
        on its peers - in a barrier, a collective - and no log of the job moves: it is alone
        in a phase (downloading its weights from a slow mirror, saving or compressing a
        checkpoint, loading, compiling) and the job's steps have stopped for it. Bytes that
        one rank writes are not the job's progress; the phase is named with its rate and,
        where its file tells how far it is, its ETA (``diag.verdict.long_phase``). Wait for
        it, or speed up what it reads or writes.""",
        examples=["gloo_download_slow_mirror"],
    ),
    rule(
        "output_moves",
        "motion",
        ["progressing"],
        motion.output_moves,
        words.MOVES_OUTRANKS,
        ["deltas"],
        doc="""The job's own output moves between samples: a log grows with lines that are
        not a heartbeat and not failures alone (``output_reports_failure``'s; beside
        completions the sentence carries their rate), a progress bar advances, bytes are
        written or sent. Progress is the
        one thing a user wants to know first; stacks caught mid-collective say nothing
        against it.""",
        examples=["gloo_train_logs", "stdout_progress", "vllm_load"],
    ),
    rule(
        "consumes_feed",
        "motion",
        ["progressing"],
        motion.consumes_feed,
        words_output.CONSUMES_FEED_OUTRANKS,
        ["deltas"],
        doc="""Nothing is written, but a process blocks reading a TCP socket on which a feed's
        messages keep arriving (``diag.verdict.fed_socket``): tcp_info's bytes received grow,
        the last byte a moment ago, and its reading thread is woken for each - 20 wakes or
        more over the capture, 1 KiB a wake or less. Useful work here is consuming the feed:
        each message is read as it arrives and handled before the next (the thread blocks
        for the next one, so nothing waits unread), at the pace the publisher sends. What it
        does with them may leave no trace diag sees (a running average in memory); that it
        keeps up is the job's progress. A transfer's chunks (kilobytes a wake: a download
        that trickles) stay ``works_silently``'s slow; a consumer that also writes is
        ``output_moves``'.""",
        examples=["subscriber_busy_feed"],
    ),
    rule(
        "spins_for_dead_thread",
        "deaths",
        ["deadlocked"],
        deaths.spins_for_dead_thread,
        SPIN_DEAD_OUTRANKS,
        ["deltas"],
        doc="""A thread spins on one line of the job's own code at every sample (a pure-Python
        busy-wait, ``while not self.ready: pass``: no poll frame to see), busy in every
        interval, while its process's log says one of its threads died ("Exception in thread
        prefetch: ...", CPython's excepthook) and no live thread has that name - a log no
        other process writes, or one where it alone of the writers runs the job's files the
        traceback names (the death line names no process; ``diag.verdict.death_owner``): the
        flag the spin waits for was that thread's to set. Read as work it said "slow - wait,
        don't kill"; it never ends (``diag.verdict.dead_setter``, the dead thread as
        ``pileup.dead_thread`` reads it).""",
        examples=["spin_on_dead_loader"],
    ),
    rule(
        "waits_for_dead_thread",
        "deaths",
        ["deadlocked"],
        deaths.waits_for_dead_thread,
        BLOCK_DEAD_OUTRANKS,
        doc="""A thread waits untimed on an Event, a Condition or a lock in the job's own code
        (``Event.wait()`` in a training step, in an RPC handler), on one stack with no CPU at
        every sample, while its process's log says one of its threads died ("Exception in
        thread loader: ...", CPython's excepthook) and no live thread has that name - a log no
        other process writes, or one where it alone of the writers runs the job's files the
        traceback names (``diag.verdict.death_owner``): the death line names no process, and
        an idle service waiting on its stop Event beside a helper whose thread died in a
        shared log reads the same; writers of one script (ranks, a server re-executing its
        client's file) leave the death nobody's - what it
        waits for was that thread's to set (``diag.verdict.dead_setter``) - while nothing in
        the job works (a live thread computing or reading may be its setter). A port the job
        listens on, a server's own loop made it read "idle, waiting for work"; it never ends.
        A queue's ``get`` is
        left out - an idle consumer waits there for anyone's next item.""",
        examples=["grpc_server_log_dead_loader"],
    ),
    rule(
        "spins_with_no_party",
        "peers",
        ["deadlocked"],
        peers.spins_with_no_party,
        SPIN_ALONE_OUTRANKS,
        ["graph", "deltas"],
        doc="""A thread burns a core in native code in a spin-wait loop - its PCs sit in a
        loop a few bytes long that holds the CPU's spin-wait hint (x86 PAUSE; aarch64 YIELD,
        WFE, ISB), read from its code (``diag.probes.spin_code``) - with the same stack at
        every sample, while nothing else of the job runs or moves and the wait-for graph finds
        nothing that could wake it. Such a loop waits for another party to write the word it
        polls (a peer's flag in shared memory, a message): it does not compute, whatever
        library it is in. With no live process of the job left to write it - the peer
        crashed and was reaped, leaving no zombie - it spins for ever. Read as work it said
        "slow: CPU-bound - wait, don't kill". While another process of the job computes, the
        spin waits on it: slow (``works_silently``). Ranks of a multi-rank job, and a pack's
        own progress engines (MPI, UCX, CUDA), are read by the peer rows instead.""",
        examples=["native_spin_dead_peer"],
    ),
    rule(
        "works_silently",
        "motion",
        ["slow"],
        motion.works_silently,
        words.WORK_OUTRANKS,
        doc="""Nothing is written, but the job works: CPU outside known waits and poll loops,
        reads rising, memory growing, a GPU at power, or data arriving on the socket a
        process blocks reading (tcp_info's bytes received growing, the last byte a moment
        ago: a download that trickles - a recv() is no read(), rchar never shows it). A
        weight load, a dequantisation, a regex holding the GIL look hung and are not: slow,
        don't kill it.""",
        examples=[
            "gloo_load_dequant",
            "gil_regex",
            "slow_read",
            "vllm_startup_engine",
            "download_trickles",
        ],
    ),
    rule(
        "children_work",
        "motion",
        ["slow", "deadlocked"],
        motion.children_work,
        words.CHILDREN_WORK_OUTRANKS,
        doc="""A process waits on children that compute (inductor's g++ and cc1plus, nvcc:
        each lives a second and is reaped, so only their CPU charged to the parent shows the
        work), or a training loop waits on DataLoader workers that are inside the dataset's
        own code (a slow remote fetch, slow storage): the job is slow or data-starved, not
        idle. A worker whose request has had no byte of answer for 2 min or more (tcp_info's
        last-data ages) is no slow fetch but a hung one: with no timeout the loop waits for
        ever - deadlocked, the worker and the store named.""",
        examples=[
            "build_extension_reaped",
            "explore_dataloader_slow",
            "dataloader_fetch_hung",
            "dataloader_workers_saturated",
        ],
    ),
    rule(
        "calls_itself",
        "graph",
        ["deadlocked"],
        graph.calls_itself,
        words.OWN_SERVER_OUTRANKS,
        ["graph"],
        doc="""A thread waits for the answer of a TCP connection whose other end sits in its
        own process's listen queue, and no other thread of it accepts (the graph's tcp
        self-edge): a synchronous HTTP call from an async handler to its own port. The
        thread that would answer is the one waiting.""",
        examples=["uvicorn_calls_itself"],
    ),
    rule(
        "pipe_outlives_child",
        "graph",
        ["deadlocked"],
        graph.pipe_outlives_child,
        words.PIPE_HOLDER_OUTRANKS,
        ["graph"],
        doc="""A process waits in ``Popen.communicate`` (``run(capture_output=True)``) for EOF
        on its child's pipes; the child has exited, but a process it started in the
        background (``sh -c "server &"``) inherited the write end and still holds it. That
        process, which may never exit, is what the waiter waits on. (Its example was
        recorded by tests/test_wait_edges_real.py.)""",
        examples=["wait_edges_communicate_background"],
    ),
    rule(
        "waits_on_stopped_outsider",
        "graph",
        ["deadlocked"],
        graph.waits_on_stopped_outsider,
        words.STOPPED_OUTSIDER_OUTRANKS,
        ["graph"],
        doc="""Nothing of the job works and a chain of its waits ends at a stopped or zombie
        process outside the job: a local server it calls, the writer of its pipe, the holder
        of its file lock. That process must run again (or be replaced) first; killing the
        job would not help. (Its example was recorded by tests/test_file_locks.py.)""",
        examples=["file_lock_stopped_holder"],
    ),
    rule(
        "peer_unreachable",
        "graph",
        ["deadlocked"],
        graph.peer_unreachable,
        DEAD_LINK_OUTRANKS,
        [],
        doc="""Nothing of the job works and a process of it blocks on a TCP connection whose
        other end's kernel acknowledges nothing: tcp_info, read every sample, shows its data
        unacknowledged (``tcpi_unacked``) or its zero window probed without answer
        (``tcpi_probes``) in every sample, no acknowledgement for 3 s or more
        (``tcpi_last_ack_recv``) and the retransmission timeout backed off twice or more
        (``tcpi_backoff``, ``tcpi_total_retrans``): the peer's host is down or the link cut,
        and the answer never comes (``diag.verdict.dead_link``). A host that is up
        acknowledges whatever its process does - a stopped or busy peer leaves nothing in
        flight, and stays with the rules after (a stopped process outside the job, a request
        unanswered); a quiet link records nothing. A rank waiting in a collective blocks on
        no socket of its own - its backend's threads move the data - so every connection of
        it is read: one dead pair is a collective that can never complete, however alike the
        ranks' stacks look (a link cut mid-training).""",
        examples=["tcp_peer_unreachable", "gloo_link_cut"],
    ),
    rule(
        "flow_paused",
        "flow",
        ["slow"],
        flow.flow_paused,
        FLOW_OUTRANKS,
        doc="""Nothing of the job's output moves and a framework paused one of its processes
        until a named party acts (``diag.verdict.flow_control``, from the packs'
        ``flow_pauses``): a gRPC stream writer waits in ``_send_response`` in every sample for
        its client to read (HTTP/2 flow control), or a Dask worker logged "Pausing worker" for
        memory and still holds it. Its parked thread and idle event loop read "idle, healthy"
        (or its clients' requests "deadlocked"); the wait-for graph draws a ``flow`` edge to
        the party - the peer that must read, the memory that must fall - and that party is the
        suspect.""",
        examples=["grpc_stream_stalled", "dask_worker_paused"],
    ),
    rule(
        "waits_for_file_lock",
        "locks",
        ["slow", "deadlocked", "unknown"],
        locks.waits_for_file_lock,
        words.LOCK_HOLDER_OUTRANKS,
        doc="""Nothing of the job works and a process of it waits to take a file lock
        (``flock``, ``fcntl``) held by a process outside the job - a download, a build,
        another job under ``flock(1)``. The holder's state is the job's: busy is slow, not a
        lock of the job's own to kill it for. (Its example was recorded by
        tests/test_file_locks.py.)""",
        examples=["file_lock_busy_holder"],
    ),
    rule(
        "waits_on_filesystem",
        "locks",
        ["slow", "deadlocked"],
        locks.waits_on_filesystem,
        words.FILESYSTEM_OUTRANKS,
        doc="""A participant sleeps on a FUSE or network mount in every sample: it waits on
        that filesystem, and for a FUSE mount served on this host on the daemon holding
        ``/dev/fuse`` for it, which is the suspect. A restarted job would wait on the same
        daemon.""",
        examples=["fuse_stalled_read"],
    ),
    rule(
        "waits_for_nodes_to_join",
        "peers",
        ["idle", "deadlocked"],
        peers.waits_for_nodes_to_join,
        words.JOIN_OUTRANKS,
        doc="""torchrun's agent waits in its rendezvous with no rank started, or a rank in
        ``init_process_group`` still connects to a TCPStore no process of the capture
        listens on: the other nodes (or rank 0) have not come, and they end the wait.
        Nothing here is stuck; across merged hosts, agents with different settings that
        will never meet are.""",
        examples=["explore_rendezvous_missing", "gloo_store_port_wrong"],
    ),
    rule(
        "rendezvous_forming",
        "peers",
        ["progressing"],
        peers.rendezvous_forming,
        words_joins.FORMING_OUTRANKS,
        doc="""Every rank waits in the rendezvous (``init_process_group``, the store) and at
        least one of them arrived there during the capture from its own code (a slow
        start: a download, a config service): the start-up advances and the meeting is
        forming. Still stacks and no CPU would otherwise read as ranks that wait on each
        other for ever; the late rank was what the others waited for.""",
        examples=["store_host_arrives"],
    ),
    rule(
        "collective_laggard",
        "peers",
        ["deadlocked"],
        peers.collective_laggard,
        words.RECORDS_OUTRANKS,
        doc="""Collective records (PyTorch's Flight Recorder) show one rank behind the
        others: it is the culprit, though its stack - a wait inside C++, ``work.wait()`` -
        shows only its caller and looks like everyone else's.""",
        examples=["fr_lag_4ranks"],
    ),
    rule(
        "server_feeds_ranks",
        "doors",
        ["idle", "slow"],  # slow: still starting, no sign yet it is ready
        doors.server_feeds_ranks,
        words.SERVER_OUTRANKS,
        doc="""One rank serves a port and the other ranks wait in a collective for it to
        hand them work (a request broadcast, as tensor-parallel servers do): a ready server
        with no requests, not a rank that diverged.""",
        examples=["torchrun_tp_server_idle"],
    ),
    rule(
        "peer_backs_off",
        "peers",
        ["slow"],
        peers.peer_backs_off,
        words.BACKOFF_OUTRANKS,
        doc="""Ranks wait on a peer in a collective, and every rank outside it sleeps in a
        timed wait (a retry's back-off) whose timeout, read from the kernel, ends within 10
        min: it resumes by itself, so the job is slow - wait for it, and the sentence says
        when it wakes and quotes its retry line. A sleep of 10 min or more (``while True:
        time.sleep(3600)``), one slept again and again with no longer budget, or the same
        retry line logged again and again (a condition that can never hold) is not a
        back-off: ``peers_wait`` names the rank.""",
        examples=["gloo_backoff_503"],
    ),
    rule(
        "peers_wait",
        "peers",
        ["deadlocked"],
        peers.peers_wait,
        words.PEERS_OUTRANKS,
        doc="""Ranks wait on their peers and nothing moves: the odd rank out - in another
        collective, asleep outside any, at a debugger prompt, or missing - is why, and the
        group never completes its collective.""",
        examples=[
            "gloo_diverge_sleep",
            "gloo_mismatched_collective",
            "torchrun_pdb_rank",
            "gloo_ckpt_retry_full_disk",
        ],
    ),
    rule(
        "results_never_come",
        "peers",
        ["deadlocked", "slow"],
        peers.results_never_come,
        words.LOST_RESULTS_OUTRANKS,
        doc="""A process waits for pool or future results that no worker computes: a task
        was lost (its worker killed, e.g. by the OOM killer) or its worker is blocked - a
        task waiting on another task of the same full pool. When its framework's scheduler
        says the work can never be placed (a pack's ``infeasible_lines``: Ray's "No available
        node types can fulfill resource request"), that is the cause: nothing was lost, a
        rerun waits the same, the request or the cluster must change
        (``diag.verdict.infeasible``). A worker blocked opening a named pipe no process
        opened for writing (the kernel's ``wait_for_partner``) is named as the end of the
        chain, with the pipe's writer as the remedy. An event loop's own thread blocked in
        ``Future.result`` inside a coroutine, with no other thread to complete it, waits on
        itself (``diag.verdict.loop_self_wait``: ``run_coroutine_threadsafe(coro,
        loop).result()`` on that loop) - named so, with the remedy (await the future).
        Workers that are themselves calls waiting for results (Ray actors in ``ray.get``,
        each running one call at a time) are nested calls waiting on each other - a cycle,
        nothing lost: named by their titles.
        And when every pool worker that runs a task sleeps in a timed wait that ends by
        itself within a sane back-off (``diag.verdict.backoff``: a rate limit's
        Retry-After), the results come when they wake: slow, not a lost task.""",
        examples=[
            "pool_lost_task",
            "ray_task_never_fits",
            "pool_task_opens_fifo",
            "asyncio_result_on_loop",
            "ray_actor_cycle",
            "pool_rate_limited",
        ],
    ),
    rule(
        "lock_cycle",
        "locks",
        ["deadlocked"],
        locks.lock_cycle,
        words.LOCK_CYCLE_OUTRANKS,
        doc="""Two or more threads of one process each hold a lock another of them waits for
        (taken in opposite orders): a cycle only killing the process ends.""",
        examples=["lock_order", "lock_waiters"],
    ),
    rule(
        "gpu_spins",
        "peers",
        ["deadlocked"],
        peers.gpu_spins,
        words.GPU_SPIN_OUTRANKS,
        doc="""A GPU reads busy at idle power and nothing else moves: a kernel spins waiting
        on a peer (an NCCL collective whose partner never came). This machine has no GPU, so
        its example is a bundle built by the test helpers, not a recording.""",
        examples=["fixture:gpu_busy_at_idle_power"],
    ),
    rule(
        "lock_without_door",
        "locks",
        ["deadlocked"],
        locks.lock_without_door,
        words.LOCK_NO_DOOR_OUTRANKS,
        doc="""A thread waits on a lock and its own process has no door - no timer, port or
        input that could wake a thread holding it. Only a thread of the same process can
        release the lock, so it waits for ever, whatever other processes listen on (a lock
        copied held into a fork()ed worker).""",
        examples=["gunicorn_handler_hangs"],
    ),
    rule(
        "lock_behind_clients",
        "locks",
        ["deadlocked", "idle"],  # idle: a client that polls on a timer may hold it
        locks.lock_behind_clients,
        SERVER_LOCK_OUTRANKS,
        doc="""A server of the job keeps a lock for its clients (a multiprocessing Manager's
        shared ``Lock``: each ``acquire`` is a call one of its threads makes for the client)
        and its threads serving the waiting clients block on it, untimed, in every sample,
        while its other threads only accept on a unix socket, poll a timer or read a client's
        connection (``diag.verdict.server_lock``). Only a client's request can release it,
        and every live client holding a peer of its sockets waits on it for a reply or only
        polls or waits for children: the client that took the lock is gone (killed holding
        it - the server never releases a lock for a client that went away). It read "idle:
        it wakes on a timer" (the server's shutdown poll, the parent's poll of its workers).
        A client that works, a long sleep holding the lock, a client outside the job or a TCP
        port stay out. A client polling on a timer that is not the waiters' parent (polling
        for them) may be the holder - a worker that took the lock and checks for a file every
        second before it releases it looks the same - and its next wake may release it: idle,
        that client named (it had read "deadlocked: the client that took the lock is gone").""",
        examples=["manager_lock_orphaned", "manager_lock_holder_polls"],
    ),
    rule(
        "log_reports_death",
        "deaths",
        ["deadlocked"],
        deaths.log_reports_death,
        words.LOGGED_DEATH_OUTRANKS,
        doc="""Nothing moves and the job's own log says one of its processes died or crashed
        (a worker killed and reaped before diag looked: no zombie left, only its peers'
        error lines). The dead process is the cause of the still job.""",
        examples=["sglang_tp2_rank_reaped"],
    ),
    rule(
        "requests_unanswered",
        "doors",
        ["deadlocked", "slow", "idle"],  # idle: a long poll, every handler on a timeout
        doors.requests_unanswered,
        words.UNANSWERED_OUTRANKS,
        doc="""Requests that arrived before the capture began got no byte of answer during
        it, while nothing in the server moves. Its event loop still accepts (a listening
        port, epoll) - what made it look idle - but its handler is stuck. Unless every
        thread waiting beside the accept loop waits with a timeout the kernel says ends
        within 10 min: a long poll (``diag.verdict.long_poll``), idle - it answers when its
        event comes or its timeout fires. Or unless its handlers wait for results that its
        only busy threads - pool workers inside their tasks - will give when their timed
        sleeps end, within 10 min: a pool full of slow calls, slow.""",
        examples=["http_request_cycle", "long_poll_waiting", "pool_full_health_answers"],
    ),
    rule(
        "pipe_full_in_dead_chain",
        "graph",
        ["deadlocked"],
        graph.pipe_full_in_dead_chain,
        words.FULL_PIPE_OUTRANKS,
        ["graph"],
        doc="""Every chain of waits ends where nothing can end it, and the cycle is a writer
        blocked on a full pipe whose reader waits on the writer (a parent in ``Popen.wait``
        with its child's stdout unread): told as that picture, with the fix
        (``communicate()``, a reader thread, a file).""",
        examples=["subprocess_pipe_full"],
    ),
    rule(
        "chains_never_end",
        "graph",
        ["deadlocked"],
        graph.chains_never_end,
        words.DEAD_CHAINS_OUTRANKS,
        ["graph"],
        doc="""Nothing works and every chain of waits from the participants ends where
        nothing can ever end it: a stopped or dead process, or a cycle (two processes each
        reading a pipe the other holds). The wait-for graph's deadlock, for shapes no rule
        above names by its picture. A listening socket no thread accepts on ends no wait: two
        processes reading the one TCP connection between them are a cycle whatever port one
        of them still holds.""",
        examples=["pipe_deadlock", "tcp_handshake_both_recv"],
    ),
    rule(
        "polls_for_stale_lock_file",
        "locks",
        ["deadlocked"],
        locks.polls_for_stale_lock_file,
        words.LOCK_FILE_OUTRANKS,
        doc="""Nothing in the job works and its processes poll for a lock file to disappear
        (torch's ``FileBaton`` around an extension build) that no process of the job
        created: a build killed while holding it left it behind. The job never goes on by
        itself, and a rerun waits on the same file; deleting it does. (Its example was
        recorded by tests/test_wait_edges_real.py.)""",
        examples=["wait_edges_stale_torch_build_lock"],
    ),
    rule(
        "timer_cannot_end",
        "graph",
        ["deadlocked"],
        graph.timer_cannot_end,
        FUTILE_POLL_OUTRANKS,
        doc="""Nothing works, and the one thing that wakes is a thread polling on a timer that
        cannot end the wait (``diag.verdict.futile_poll``): it woke twice or more, back in the
        same sleep with the same stack each time, reading and writing nothing, while the other
        side never moved. A child blocks writing to a full pipe whose read end its parent
        holds and never reads (``while proc.poll() is None: sleep()``); threads block untimed
        on one lock while every other thread of their process only polls (it holds the lock
        while waiting for them, or the holder is gone). As for a put on a full queue nobody
        drains, the timer is no door; a single long sleep (a back-off) still is. A lock whose
        likely holder (``lock_holder``) is a thread parked untimed on a condition in the
        job's code - a producer waiting in a full queue's ``put`` inside ``with lock:`` -
        while the rest only block on the lock or poll, is released by nothing.""",
        examples=["child_pipe_polled", "lock_held_polling_uploads", "thread_put_holding_lock"],
    ),
    rule(
        "wakes_only_itself",
        "graph",
        ["deadlocked"],
        graph.wakes_only_itself,
        SELF_WAKE_OUTRANKS,
        doc="""Nothing works, and in every sample nothing but the process itself can wake it
        (``diag.verdict.self_wake``): no port, no connection, no fd it reads or polls but its
        event loop's own wake-up pipe (the epoll interest list, ``/proc/PID/fdinfo``), no
        signal handler but SIGINT; its threads sleep or wait on its own locks and events, and
        one of them waits on what no timer ends (a lock or event untimed, an event loop). It
        woke during the capture, and its only output was lines that say it lives. An asyncio
        task awaiting an Event or Future that only another task of its loop would set, behind
        a heartbeat task, reads so (the awaiting coroutine is on no stack: the loop's wakes
        and what they write tell). A loop watching a socket or a port, a SIGTERM handler, a
        timer that writes anything else, a silent timer (it may poll a file or a clock) stay
        doors; so does a process whose every thread sleeps on its own timer (a daemon
        checking for a flag file and logging ``alive tick=N``, or joining the thread
        that does - a join waits for a live thread of its own): nothing of it waits, each
        wake is its poll.""",
        examples=["asyncio_event_heartbeat", "thread_event_heartbeat"],
    ),
    rule(
        "waits_for_outside",
        "doors",
        ["idle", "slow"],  # slow: still starting, no sign yet it is ready
        doors.waits_for_outside,
        words.DOORS_OUTRANKS,
        doc="""Every wait is one something outside the job can end: a listening port, stdin,
        a signal, a timer. Idle, healthy, waiting for work - unless a start-up phase shows
        and no sign that it is ready does: then slow, still starting.""",
        examples=[
            "http_idle",
            "asyncio_idle",
            "vllm_idle_ready",
            "ray_idle",
            "flock_holder_sleeps",
            "flag_file_daemon",
            "flag_file_daemon_thread",
        ],
    ),
    rule(
        "pipe_full",
        "graph",
        ["deadlocked"],
        graph.pipe_full,
        words.PIPE_FULL_OUTRANKS,
        doc="""At least half the live processes block writing to a full pipe or socket whose
        reader stopped reading, though not every chain is dead (a timer or a port
        elsewhere): the writers and their likely reader are named.""",
        examples=["log_shipper_stalled"],
    ),
    rule(
        "chains_end_at_doors",
        "graph",
        ["idle"],
        graph.chains_end_at_doors,
        words.DOOR_CHAINS_OUTRANKS,
        ["graph"],
        doc="""Nothing moves and no participant waits on a door of its own, but every chain
        of their waits ends at a process that does: a helper a rank waits for, sleeping on a
        timer while it polls for a file or a host. Read alone the ranks' waits said "nothing
        can wake it"; the chain names who can.""",
        examples=["rank_waits_on_polling_helper"],
    ),
    rule(
        "waits_on_quiet_peer",
        "graph",
        ["idle"],
        graph.waits_on_quiet_peer,
        QUIET_PEER_OUTRANKS,
        ["graph"],
        doc="""Nothing moves, and every participant blocks reading a TCP socket whose other
        end is a live process outside the job (the graph's tcp edge) that owes it nothing:
        tcp_info's last-data ages say it sent no request after the last data it got
        (``FdEnd.owed``, ``diag.verdict.quiet_peer``). A subscriber on a quiet feed or broker
        waits for a push: idle, the peer named - where a client whose request is unanswered
        (a reply owed) stays ``nothing_can_wake``.""",
        examples=["subscriber_quiet_feed"],
    ),
    rule(
        "reply_owed",
        "graph",
        ["slow", "deadlocked"],
        graph.reply_owed,
        OWED_OUTRANKS,
        ["graph"],
        doc="""Nothing moves, and every participant blocks reading the reply to a request it
        sent on a TCP connection whose other end is one live process outside the job (the
        graph's tcp edge; tcp_info says this side sent data after the last it got,
        ``FdEnd.owed``): only that process can end the wait, so it is the suspect, with the
        request's age (``FdEnd.last_sent_s``). A peer that burns CPU over the capture
        (``FdHolder.cpu_ticks``) computes the reply (slow); one that does no work owes it
        and does nothing about it (deadlocked) - and restarting the job would wait on the
        same process.""",
        examples=["subscriber_request_unanswered"],
    ),
    rule(
        "silence_within_rhythm",
        "motion",
        ["unknown"],
        motion.silence_within_rhythm,
        SILENCE_OUTRANKS,
        ["deltas"],
        doc="""The job's log has a beat - its tail's timestamped lines, in bursts, a median gap
        of 3 s or more - that is longer than the capture, and it has been quiet for less than
        1.5 of its periods: a 6 s capture of a job that logs a step every 12 s cannot call a
        hang, whatever its ranks wait on (``diag.verdict.rhythm``). The sentence gives the
        capture length that decides; ``diag capture`` without ``--count``/``--interval``
        extends itself (at most 60 s) to cover the beat. It overrules a deadlocked decision
        drawn from waits alone (peers, graph, doors), quoting it; a death or a lock's
        structure (a cycle, a lock held by its own waiter) still decides.""",
        examples=["gloo_step_rhythm_short"],
    ),
    rule(
        "nothing_can_wake",
        "graph",
        ["deadlocked"],
        graph.nothing_can_wake,
        "",
        fallback=True,
        doc="""The last row, which always applies: nothing moves and nothing outside can
        wake the job - its processes wait on each other, or on a peer that never answers
        (two asyncio tasks awaiting each other, a client whose server never replies).""",
        examples=["asyncio_deadlock"],
    ),
)


# The row a deadlocked decision about a runnable, moving process yields to.
_SPARED_BY = next(r for r in TABLE if r.id == "cpu_held_back")
# The row a deadlocked decision drawn from waits yields to on a capture shorter than the
# job's log rhythm.
_HEDGED_BY = next(r for r in TABLE if r.id == "silence_within_rhythm")
# Rows whose deadlock is read from threads blocked on a lock in every sample (a pile and its
# holder; a lock waiter beside failures only): another thread of the process that runs - a
# client, an event loop, a health handler - unblocks none of them, so it spares nothing.
_THREADS_BLOCKED = frozenset({"requests_pile_up", "output_reports_failure"})


@dataclass(frozen=True)
class Outcome:
    """What the table gave: the deciding row and its decision, the later rows that matched
    too, and the rows that raised or were skipped (one line each)."""

    rule: Rule
    decision: Decision
    also: Tuple[RuleMatch, ...]
    problems: Tuple[str, ...]


def _ask(row: Rule, s: Situation, problems: List[str]) -> Optional[Decision]:
    if "graph" in row.needs and s.graph is None:
        return None
    try:
        return row.decide(s)
    except Exception as exc:  # a bug in one rule must not cost the verdict
        problems.append(words.rule_failed(row.id, exc))
        return None


def apply(s: Situation, table: Tuple[Rule, ...] = TABLE) -> Outcome:
    """The first row that decides, the later ones that would have, and what failed."""
    problems: List[str] = []
    chosen: Optional[Tuple[Rule, Decision]] = None
    also: List[RuleMatch] = []
    for row in table:
        if chosen is not None and row.fallback:
            continue
        decision = _ask(row, s, problems)
        if decision is None:
            continue
        if chosen is None:
            chosen = (row, decision)
        else:
            also.append(RuleMatch(rule=row.id, state=decision.state, overruled=chosen[0].outranks))
    if chosen is None:  # only if the fallback itself failed
        row = table[-1]
        chosen = (row, Decision("unknown", 0.2, words.NO_RULE_DECIDED))
    # runnable is not blocked (#37) - unless the row judged the threads themselves blocked
    spared = None if chosen[0].id in _THREADS_BLOCKED else machine.spare_runnable(s, chosen[1])
    if spared is not None:
        also.insert(
            0, RuleMatch(rule=chosen[0].id, state="deadlocked", overruled=_SPARED_BY.outranks)
        )
        chosen = (_SPARED_BY, spared)
    hedged = motion.rhythm_hedge(s, chosen[1], chosen[0].family)  # silence vs rhythm (#37)
    if hedged is not None:
        also = [m for m in also if m.rule != _HEDGED_BY.id]
        also.insert(0, RuleMatch(rule=chosen[0].id, state="deadlocked", overruled=SILENCE_OUTRANKS))
        chosen = (_HEDGED_BY, hedged)
    return Outcome(chosen[0], chosen[1], tuple(also), tuple(problems))


__all__ = ["TABLE", "Decision", "Outcome", "Rule", "apply"]
