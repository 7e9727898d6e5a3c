"""The schema registry with Confluent's own Python client.

Run by broker/tests/registry_confluent.rs against a real es-broker:
REGISTRY_URL is its --registry-addr, HTTP_URL its HTTP API. Every check
is an assert; the script prints one line per step and `registry: N passed`
at the end, and exits non-zero on the first failure.
"""

import base64
import json
import os
import sys
import urllib.request

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

REGISTRY = os.environ["REGISTRY_URL"]
HTTP = os.environ["HTTP_URL"]
CONF = {"url": REGISTRY}
if os.environ.get("REGISTRY_USER_INFO"):
    CONF["basic.auth.user.info"] = os.environ["REGISTRY_USER_INFO"]

V1 = json.dumps({"type": "record", "name": "Order", "namespace": "shop",
                 "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}]})
V2 = json.dumps({"type": "record", "name": "Order", "namespace": "shop",
                 "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"},
                            {"name": "qty", "type": "int", "default": 1}]})
V3_NO_DEFAULT = json.dumps({"type": "record", "name": "Order", "namespace": "shop",
                            "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"},
                                       {"name": "qty", "type": "int", "default": 1},
                                       {"name": "price", "type": "double"}]})

passed = 0


def step(name):
    global passed
    passed += 1
    print(f"ok {passed}: {name}", flush=True)


def fresh():
    """A new client: no cache, so every call reaches the broker."""
    return SchemaRegistryClient(CONF)


def error_of(fn):
    try:
        fn()
    except SchemaRegistryError as e:
        return e
    raise AssertionError("expected a SchemaRegistryError")


def http(method, path, body=None):
    req = urllib.request.Request(HTTP + path, method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req) as resp:
        return json.loads(resp.read())


# 1. Register, again, get by id, latest version.
sr = fresh()
sid = sr.register_schema("orders-value", Schema(V1, "AVRO"))
assert sid == 1, sid
again = fresh().register_schema("orders-value", Schema(V1, "AVRO"))
assert again == 1, again
assert fresh().get_versions("orders-value") == [1]
step("register returns id 1, and 1 again with the version still 1")

got = fresh().get_schema(1)
assert json.loads(got.schema_str) == json.loads(V1), got.schema_str
assert got.schema_type == "AVRO"
latest = fresh().get_latest_version("orders-value")
assert (latest.schema_id, latest.version, latest.subject) == (1, 1, "orders-value"), latest
step("get_schema(1) and get_latest_version")

# 2. Evolution under BACKWARD (the default).
assert fresh().test_compatibility("orders-value", Schema(V2, "AVRO")) is True
assert fresh().test_compatibility("orders-value", Schema(V3_NO_DEFAULT, "AVRO")) is False
step("test_compatibility: a field with a default is compatible, one without is not")

v2 = fresh().register_schema("orders-value", Schema(V2, "AVRO"))
assert v2 == 2, v2
assert fresh().get_latest_version("orders-value").version == 2
e = error_of(lambda: fresh().register_schema("orders-value", Schema(V3_NO_DEFAULT, "AVRO")))
assert e.http_status_code == 409, (e.http_status_code, e.error_code, e.error_message)
assert e.error_code == 40901, e.error_code
step("BACKWARD: version 2 with a default accepted, a field without one refused 409")

sr.set_compatibility("orders-value", "NONE")
assert fresh().get_compatibility("orders-value") == "NONE"
v3 = fresh().register_schema("orders-value", Schema(V3_NO_DEFAULT, "AVRO"))
assert v3 == 3, v3
assert fresh().get_versions("orders-value") == [1, 2, 3]
step("set_compatibility NONE: the refused schema is accepted as version 3")

# 3. The same schema under two subjects shares an id.
shared = fresh().register_schema("shipments-value", Schema(V1, "AVRO"))
assert shared == 1, shared
assert sorted(fresh().get_subjects_by_schema_id(1)) == ["orders-value", "shipments-value"]
step("one schema under two subjects: one id, both listed")

# 4. Lookup errors.
e = error_of(lambda: fresh().lookup_schema("no-such-subject", Schema(V1, "AVRO")))
assert (e.http_status_code, e.error_code) == (404, 40401), (e.http_status_code, e.error_code)
other = json.dumps({"type": "record", "name": "Other", "fields": [{"name": "x", "type": "int"}]})
e = error_of(lambda: fresh().lookup_schema("orders-value", Schema(other, "AVRO")))
assert (e.http_status_code, e.error_code) == (404, 40403), (e.http_status_code, e.error_code)
found = fresh().lookup_schema("orders-value", Schema(V2, "AVRO"))
assert (found.schema_id, found.version) == (2, 2), found
step("lookup_schema: 40401 unknown subject, 40403 unknown schema, found otherwise")

# 5. Deletes: soft, permanent, ids never reused.
e = error_of(lambda: fresh().delete_version("shipments-value", 1, permanent=True))
assert e.error_code == 40407, e.error_code
assert fresh().delete_subject("shipments-value") == [1]
assert fresh().get_subjects() == ["orders-value"]
e = error_of(lambda: fresh().get_versions("shipments-value"))
assert e.error_code == 40401, e.error_code
assert fresh().get_versions("shipments-value", deleted=True) == [1]
assert fresh().delete_subject("shipments-value", permanent=True) == [1]
assert fresh().get_subjects(deleted=True) == ["orders-value"]
step("soft delete hides, ?deleted=true shows; permanent before soft is 40407; then permanent works")

fresh().set_compatibility("orders-value", "NONE")
assert fresh().delete_version("orders-value", 3) == 3
assert fresh().delete_version("orders-value", 3, permanent=True) == 3
e = error_of(lambda: fresh().get_schema(3))
assert e.error_code == 40403, e.error_code
new_id = fresh().register_schema("orders-value", Schema(json.dumps(
    {"type": "record", "name": "Order", "namespace": "shop",
     "fields": [{"name": "id", "type": "long"}]}), "AVRO"))
assert new_id == 4, f"id 3 was deleted for good and must not come back: got {new_id}"
step("a permanently deleted id is gone (40403) and not reused by the next schema")

# 6. End to end: AvroSerializer, produce through es HTTP, fetch, AvroDeserializer.
http("POST", "/v1/topics", {"name": "orders", "partitions": 1})
ser_client = fresh()
serializer = AvroSerializer(ser_client, V2)
ctx = SerializationContext("orders", MessageField.VALUE)
order = {"id": 42, "item": "tea", "qty": 3}
data = serializer(order, ctx)
assert data[0] == 0 and int.from_bytes(data[1:5], "big") == 2, data[:5]
http("POST", "/v1/topics/orders/records",
     {"encoding": "base64", "records": [{"value": base64.b64encode(data).decode()}]})
fetched = http("GET", "/v1/topics/orders/partitions/0/records?offset=0&encoding=base64")
raw = base64.b64decode(fetched["records"][0]["value"])
assert raw == data
deserializer = AvroDeserializer(fresh())
assert deserializer(raw, ctx) == order
step("AvroSerializer -> es HTTP produce -> fetch -> AvroDeserializer gives the same record")

assert fresh().get_compatibility() == "BACKWARD"
fresh().set_compatibility(level="FULL")
assert fresh().get_compatibility() == "FULL"
fresh().set_compatibility(level="BACKWARD")
step("global compatibility read and set")

print(f"registry: {passed} passed, 0 failed", flush=True)
