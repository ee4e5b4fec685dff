"""Local paths and gs:// paths behind one small set of functions, in four modules:

- `paths`: the path rules, no I/O (the gs:// prefix, bucket names, join, wildcards);
- `gcs`: gs:// through the google-cloud-storage client (the client, retries, objects) and the
  model of how TensorFlow reads gs:// (its read block);
- `files`: listing, globbing, reading, sizes, versions, removing, local file checks;
- `commit`: atomic writes (a rename locally, a whole-object upload with a generation
  precondition on GCS) and reads and deletes tied to a gs:// object's generation.

The rest of tfpipe calls them through this package, `from tfpipe import storage` and
`storage.join(...)`, which names them all. A test patches a setting where it is read, in its
module (`storage.gcs.RETRY_BASE_DELAY_S`): it is not named here, so patching it here fails.
"""

from tfpipe.errors import AlreadyExists as AlreadyExists
from tfpipe.errors import CredentialsError as CredentialsError
from tfpipe.errors import InvalidPath as InvalidPath
from tfpipe.errors import StorageError as StorageError
from tfpipe.storage import commit as commit
from tfpipe.storage import files as files
from tfpipe.storage import gcs as gcs
from tfpipe.storage import paths as paths
from tfpipe.storage.commit import commit_file as commit_file
from tfpipe.storage.commit import current_umask as current_umask
from tfpipe.storage.commit import read_generation as read_generation
from tfpipe.storage.commit import remove_generation as remove_generation
from tfpipe.storage.commit import temp_name as temp_name
from tfpipe.storage.commit import write_atomic as write_atomic
from tfpipe.storage.files import broken_link as broken_link
from tfpipe.storage.files import exists as exists
from tfpipe.storage.files import file_kind as file_kind
from tfpipe.storage.files import glob as glob
from tfpipe.storage.files import identity as identity
from tfpipe.storage.files import iter_lines as iter_lines
from tfpipe.storage.files import listdir as listdir
from tfpipe.storage.files import makedirs as makedirs
from tfpipe.storage.files import open_read as open_read
from tfpipe.storage.files import read_bytes as read_bytes
from tfpipe.storage.files import remove as remove
from tfpipe.storage.files import same_version as same_version
from tfpipe.storage.files import size as size
from tfpipe.storage.files import write_problem as write_problem
from tfpipe.storage.gcs import RETRY_ATTEMPTS as RETRY_ATTEMPTS
from tfpipe.storage.gcs import check_bucket as check_bucket
from tfpipe.storage.gcs import check_credentials as check_credentials
from tfpipe.storage.gcs import gcs_block_bytes as gcs_block_bytes
from tfpipe.storage.gcs import gcs_entries as gcs_entries
from tfpipe.storage.gcs import gcs_request_bytes as gcs_request_bytes
from tfpipe.storage.gcs import reset_client as reset_client
from tfpipe.storage.gcs import retries as retries
from tfpipe.storage.gcs import with_retries as with_retries
from tfpipe.storage.paths import GCS_PREFIX as GCS_PREFIX
from tfpipe.storage.paths import HIDDEN_PREFIX as HIDDEN_PREFIX
from tfpipe.storage.paths import basename as basename
from tfpipe.storage.paths import check_url as check_url
from tfpipe.storage.paths import has_wildcards as has_wildcards
from tfpipe.storage.paths import is_gcs as is_gcs
from tfpipe.storage.paths import join as join
from tfpipe.storage.paths import resolved as resolved
from tfpipe.storage.paths import split_gcs as split_gcs
