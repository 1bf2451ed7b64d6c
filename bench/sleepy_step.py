"""A trial that mostly sleeps, for timing parallel trials without loading
torch: it fails (like the class-4 bug) when the batch file holds the int64
value given as argv[2] (a sample id) in any tensor's storage."""
import struct
import sys
import time
import zipfile

batch, culprit = sys.argv[1], int(sys.argv[2])
needle = struct.pack("<q", culprit)
time.sleep(float(sys.argv[3]) if len(sys.argv) > 3 else 0.5)
with zipfile.ZipFile(batch) as z:
    for name in z.namelist():
        if "/data/" in name:
            data = z.read(name)
            if any(data[i:i + 8] == needle for i in range(0, len(data) - 7, 8)):
                print("IndexError: Target 4 is out of bounds.", file=sys.stderr)
                sys.exit(1)
print("ok")
