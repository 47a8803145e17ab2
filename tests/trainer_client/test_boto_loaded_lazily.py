"""boto is imported only by a process that uses a bucket store (``payload_storage``'s invariant): every entry
point and a folder store's converter leave it out; a bucket store's converter brings it in."""

from __future__ import annotations

import subprocess
import sys

from durable_rollouts.paths import PROJECT_ROOT

PROBE = """
import sys
import starter, worker, slime_generate, slime_rollout
from durable_rollouts.config.payload_store import PayloadFolderSettings, PayloadStoreSettings
from durable_rollouts.trainer_client.payload_storage import data_converter
data_converter(PayloadFolderSettings(root={folder!r}))
print(sorted(name for name in ("boto3", "botocore", "aioboto3", "aiobotocore") if name in sys.modules))
data_converter(PayloadStoreSettings(bucket="rollouts", endpoint_url="http://127.0.0.1:1"))
print(sorted(name for name in ("botocore", "aioboto3") if name in sys.modules))
"""


def test_boto_is_loaded_only_for_a_bucket_store(tmp_path):
    probe = subprocess.run(
        [sys.executable, "-c", PROBE.format(folder=str(tmp_path / "payloads"))],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.splitlines() == ["[]", "['aioboto3', 'botocore']"], probe.stderr
