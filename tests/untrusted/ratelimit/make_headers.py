"""Writes headers.json: hostile rate-limit header values (huge, negative, not finite,
garbage, overflowing dates). Run: python tests/untrusted/ratelimit/make_headers.py"""

import json
from pathlib import Path

VALUES = ["-5", "-0.5", "nan", "NaN", "inf", "-inf", "1e999", "1e308", "9" * 400,
          "99999999999", "1" * 70, "", "   ", "soon", "0x10", "1_000", "٣", "１０",
          "5s5", "s", "ms", "-1s", "1.5.5s", "1m-1s", "9999999999999h", "1e3s",
          "Thu, 01 Jan 9999 00:00:00 GMT", "Mon, 99 Foo 2020 99:99:99 GMT",
          "Thu, 01 Jan 1970 00:00:00 GMT", "\x00\x01", "1;rm -rf /"]
NAMES = ["retry-after", "retry-after-ms", "x-ratelimit-reset-requests",
         "x-ratelimit-reset-tokens", "x-ratelimit-remaining-requests",
         "x-ratelimit-remaining-tokens", "x-ratelimit-limit-requests", "x-ratelimit-limit-tokens"]

if __name__ == "__main__":
    out = Path(__file__).with_name("headers.json")
    out.write_text(json.dumps({"names": NAMES, "values": VALUES}, ensure_ascii=False, indent=1))
