#!/usr/bin/env python3
"""The Kafka side of bench/kafka_vs_binary.sh: confluent-kafka (librdkafka)
against es's Kafka port, the load es-bench puts on the binary protocol:
1 KiB values to one partition, acks=all, about 1,000 records per request,
5 requests in flight. Prints one JSON object."""
import json
import sys
import time


def produce(boot, topic, seconds, size):
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": boot, "acks": "all", "linger.ms": 2,
                  "batch.size": 1000 * (size + 70), "batch.num.messages": 1000,
                  "max.in.flight.requests.per.connection": 5,
                  "queue.buffering.max.kbytes": 64 * 1024, "compression.type": "none"})
    acked = [0]

    def report(err, msg):
        if err is None:
            acked[0] += 1

    value = b"x" * size
    start = time.time()
    while time.time() - start < seconds:
        for _ in range(1000):
            try:
                p.produce(topic, value=value, partition=0, on_delivery=report)
            except BufferError:
                p.poll(0.001)
                break
        p.poll(0)
    in_window, elapsed = acked[0], time.time() - start
    p.flush(120)
    return {"records": in_window, "seconds": elapsed,
            "mb_s": in_window * size / elapsed / 1e6}


def consume(boot, topic, size):
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": boot, "group.id": "bench-unused",
                  "enable.auto.commit": False, "fetch.max.bytes": 16 << 20,
                  "max.partition.fetch.bytes": 16 << 20, "fetch.wait.max.ms": 100})
    lo, hi = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
    c.assign([TopicPartition(topic, 0, lo)])
    got, start = 0, time.time()
    while got < hi - lo:
        for m in c.consume(num_messages=10000, timeout=1.0):
            if not m.error():
                got += 1
    elapsed = time.time() - start
    c.close()
    return {"records": got, "seconds": elapsed, "mb_s": got * size / elapsed / 1e6}


if __name__ == "__main__":
    cmd, boot, topic = sys.argv[1:4]
    size = 1024
    if cmd == "produce":
        print(json.dumps(produce(boot, topic, float(sys.argv[4]), size)))
    else:
        print(json.dumps(consume(boot, topic, size)))
