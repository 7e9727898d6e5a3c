#!/usr/bin/env python3
"""Real Kafka clients against es's Kafka port, driven by broker/tests/kafka_*.rs.

Each subcommand prints JSON lines on stdout (one object per event) and exits
0 when it did what it was asked; the Rust test judges what it printed.
"""
import json
import signal
import sys
import time


def out(obj):
    print(json.dumps(obj), flush=True)


def conf(boot, extra=()):
    c = {"bootstrap.servers": boot}
    for kv in extra:
        k, v = kv.split("=", 1)
        c[k] = v
    return c


def produce(boot, topic, n, partitions, *extra):
    """n records, keys k<i>, values v<i>, partition i % partitions, explicit timestamps."""
    from confluent_kafka import Producer
    p = Producer(conf(boot, ("acks=all", "linger.ms=5") + extra))
    reports = []

    def report(err, msg):
        if err is not None:
            reports.append({"error": str(err), "code": err.code()})
        else:
            reports.append({"p": msg.partition(), "o": msg.offset(),
                            "k": msg.key().decode() if msg.key() is not None else None,
                            "v": msg.value().decode(), "ts": msg.timestamp()[1]})

    base = 1_700_000_000_000
    for i in range(n):
        while True:
            try:
                p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(),
                          partition=i % partitions, timestamp=base + i, on_delivery=report)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
        if i == n // 2:
            out({"halfway": True})
    left = p.flush(120)
    for r in reports:
        out(r)
    out({"done": True, "undelivered": left})


def produce_headers(boot, topic):
    """One record with a header: its delivery report must be an error."""
    from confluent_kafka import Producer
    p = Producer(conf(boot, ("message.send.max.retries=0",)))
    res = []
    p.produce(topic, key=b"h", value=b"with-header", headers=[("h1", b"x")],
              partition=0, on_delivery=lambda e, m: res.append(e))
    p.flush(30)
    out({"error": str(res[0]) if res and res[0] else None,
         "name": res[0].name() if res and res[0] else None})


def consume(boot, topic, partition, count):
    """Reads count records from the start of one partition (keys as None or str)."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer(conf(boot, ("group.id=reader-unused", "enable.auto.commit=false")))
    c.assign([TopicPartition(topic, int(partition), 0)])
    got, deadline = 0, time.time() + 60
    while got < int(count) and time.time() < deadline:
        m = c.poll(1.0)
        if m is None or m.error():
            continue
        got += 1
        out({"o": m.offset(), "ts": m.timestamp()[1],
             "k": None if m.key() is None else m.key().decode(),
             "v": None if m.value() is None else m.value().decode()})
    c.close()


def group_member(boot, group, topic, *extra):
    """A consumer group member: prints its assignments and what it reads,
    committing each record, until SIGTERM (then it leaves the group)."""
    from confluent_kafka import Consumer
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    c = Consumer(conf(boot, ("group.id=" + group, "enable.auto.commit=false",
                             "auto.offset.reset=earliest", "session.timeout.ms=6000",
                             "heartbeat.interval.ms=500") + extra))

    def on_assign(consumer, parts):
        out({"assigned": sorted(p.partition for p in parts)})

    def on_revoke(consumer, parts):
        out({"revoked": sorted(p.partition for p in parts)})

    c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    while not stop:
        m = c.poll(0.2)
        if m is None or m.error():
            continue
        out({"p": m.partition(), "o": m.offset()})
        try:
            c.commit(message=m, asynchronous=False)
        except Exception as e:  # a rebalance in progress: read again after it
            out({"commit_failed": str(e)})
    c.close()
    out({"closed": True})


def admin(boot, topic):
    from confluent_kafka.admin import AdminClient, NewTopic
    a = AdminClient({"bootstrap.servers": boot})
    fs = a.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
    for t, f in fs.items():
        f.result(30)
    out({"created": topic})
    dup = a.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
    try:
        dup[topic].result(30)
        out({"duplicate": "accepted"})
    except Exception as e:
        out({"duplicate": e.args[0].name()})
    md = a.list_topics(timeout=30)
    out({"listed": sorted(md.topics.keys()),
         "partitions": len(md.topics[topic].partitions)})
    for t, f in a.delete_topics([topic]).items():
        f.result(30)
    out({"deleted": topic})
    out({"after": sorted(a.list_topics(timeout=30).topics.keys())})


def create(boot, topic, partitions, *extra):
    from confluent_kafka.admin import AdminClient, NewTopic
    a = AdminClient(conf(boot, extra))
    for t, f in a.create_topics([NewTopic(topic, num_partitions=int(partitions),
                                          replication_factor=1)]).items():
        f.result(30)
    out({"created": topic})


def kp(boot, topic, group):
    """kafka-python: a producer, then a group consumer that commits; then a
    second consumer of the group resumes after the commit."""
    from kafka import KafkaConsumer, KafkaProducer
    p = KafkaProducer(bootstrap_servers=boot, acks="all")
    for i in range(20):
        p.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=0)
    p.flush(30)
    p.close()
    out({"produced": 20})

    def read(n):
        c = KafkaConsumer(topic, bootstrap_servers=boot, group_id=group,
                          auto_offset_reset="earliest", enable_auto_commit=False,
                          consumer_timeout_ms=15000)
        vals = []
        for m in c:
            vals.append(m.value.decode())
            if len(vals) == n:
                break
        c.commit()
        c.close()
        return vals

    out({"first": read(10)})
    out({"second": read(10)})


def throttle(boot, topic, seconds, rate, *extra):
    """Produces as fast as allowed for `seconds`; prints bytes acked and the
    throttle events librdkafka reported."""
    from confluent_kafka import Producer
    events = []
    cfg = conf(boot, extra)
    cfg["throttle_cb"] = lambda ev: events.append(ev.throttle_time)
    acked = [0]

    def report(err, msg):
        if err is None:
            acked[0] += len(msg.value())

    p = Producer(cfg)
    value = b"x" * 1000
    start = time.time()
    sent = 0
    while time.time() - start < float(seconds):
        # Offer `rate` bytes a second (more than the quota lets through).
        while sent < (time.time() - start) * float(rate):
            try:
                p.produce(topic, value=value, partition=0, on_delivery=report)
                sent += len(value)
            except BufferError:
                p.poll(0.01)
                break
        p.poll(0.01)
    elapsed = time.time() - start
    in_window = acked[0]
    p.flush(120)
    out({"acked": in_window, "seconds": elapsed, "throttles": len(events)})


def offsets(boot, topic, ts):
    """ListOffsets through confluent-kafka's AdminClient (earliest, latest,
    max timestamp, by time) and kafka-python's offsets_for_times, each
    with the timestamp the broker answered; then the low watermark a
    consumer learns from Fetch responses (log_start_offset)."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec
    a = AdminClient(conf(boot))
    tp = TopicPartition(topic, 0)
    for name, spec in [("earliest", OffsetSpec.earliest()), ("latest", OffsetSpec.latest()),
                       ("max", OffsetSpec.max_timestamp()),
                       ("time", OffsetSpec.for_timestamp(int(ts)))]:
        r = a.list_offsets({tp: spec})[tp].result(30)
        out({"spec": name, "offset": r.offset, "ts": r.timestamp})
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTopicPartition
    k = KafkaConsumer(bootstrap_servers=boot)
    ktp = KTopicPartition(topic, 0)
    r = k.offsets_for_times({ktp: int(ts)})[ktp]
    out({"spec": "kafka-python time", "offset": r.offset, "ts": r.timestamp})
    k.close()
    c = Consumer(conf(boot, ("group.id=offsets-unused", "enable.auto.commit=false")))
    c.assign([TopicPartition(topic, 0, 0)])
    deadline = time.time() + 60
    while time.time() < deadline:
        m = c.poll(1.0)
        if m is not None and not m.error():
            break
    lo, hi = c.get_watermark_offsets(TopicPartition(topic, 0), cached=True)
    out({"spec": "cached watermarks", "lo": lo, "hi": hi})
    c.close()


def create_rf(boot, topic, partitions, rf):
    """AdminClient.create_topics with a replication factor: the outcome."""
    from confluent_kafka.admin import AdminClient, NewTopic
    a = AdminClient({"bootstrap.servers": boot})
    f = a.create_topics([NewTopic(topic, num_partitions=int(partitions),
                                  replication_factor=int(rf))])[topic]
    try:
        f.result(120)  # a hang guard: the verdict is the outcome
        out({"created": topic})
    except Exception as e:
        out({"error": e.args[0].name()})


def delete(boot, topic):
    """AdminClient.delete_topics: the outcome."""
    from confluent_kafka.admin import AdminClient
    a = AdminClient({"bootstrap.servers": boot})
    try:
        a.delete_topics([topic])[topic].result(120)  # a hang guard
        out({"deleted": topic})
    except Exception as e:
        out({"error": e.args[0].name()})


def produce_stream(boot, topic, partitions, *extra):
    """Produces v<i> to partition i % partitions, one record every few
    milliseconds, printing each delivery report as it comes, until SIGTERM;
    then flushes and prints how many were left undelivered."""
    from confluent_kafka import Producer
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    p = Producer(conf(boot, ("acks=all", "linger.ms=5") + extra))

    def report(err, msg):
        if err is not None:
            out({"error": str(err), "code": err.code(), "v": msg.value().decode()})
        else:
            out({"p": msg.partition(), "o": msg.offset(), "v": msg.value().decode()})

    i = 0
    while not stop:
        try:
            p.produce(topic, value=f"v{i}".encode(), partition=i % int(partitions),
                      on_delivery=report)
            i += 1
        except BufferError:
            pass
        p.poll(0.004)
    left = p.flush(120)
    out({"done": True, "sent": i, "undelivered": left})


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    {"produce": lambda: produce(args[0], args[1], int(args[2]), int(args[3]), *args[4:]),
     "produce-headers": lambda: produce_headers(*args),
     "consume": lambda: consume(*args),
     "offsets": lambda: offsets(*args),
     "group-member": lambda: group_member(*args),
     "admin": lambda: admin(*args),
     "create": lambda: create(*args),
     "create-rf": lambda: create_rf(*args),
     "delete": lambda: delete(*args),
     "produce-stream": lambda: produce_stream(*args),
     "kafka-python": lambda: kp(*args),
     "throttle": lambda: throttle(*args)}[cmd]()
