"""Read the secret-key entries of a Java JCEKS keystore with the Python standard library only.

A JCEKS file (Java's ``JceKeyStore``, written by ``keytool -importpass -storetype jceks`` or by
Hadoop's ``hadoop credential create``) is, in big-endian ``DataOutputStream`` encoding::

    magic 0xCECECECE, version (1 or 2), entry count
    per entry: tag (1 private key, 2 trusted certificate, 3 secret key), alias (modified UTF-8),
               creation date (ms), then the entry body
    SHA-1(password as UTF-16BE || "Mighty Aphrodite" || everything above)

A secret-key body is a Java-serialized ``javax.crypto.SealedObject`` (in practice its subclass
``com.sun.crypto.provider.SealedObjectForKeyProtector``). Its ``encryptedContent`` is a serialized
``SecretKeySpec`` (Hadoop) or ``java.security.KeyRep`` (keytool), encrypted with Sun's
``PBEWithMD5AndTripleDES``: a key and IV derived from the password with iterated MD5 over each
half of an 8-byte salt, then 3DES-EDE in CBC mode with PKCS#5 padding. The salt and iteration
count come from ``encodedParams``, the DER ``SEQUENCE { OCTET STRING salt, INTEGER count }``.

This module implements the pieces the standard library lacks: a minimal Java serialization
parser, the key derivation, and DES/3DES (FIPS 46-3). No error message carries secret bytes.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeAlias, cast

HADOOP_DEFAULT_PASSWORD = "none"  # noqa: S105 - a public convention, not a credential
"""The store password Hadoop's credential provider uses when HADOOP_CREDSTORE_PASSWORD is unset."""

JCEKS_MAGIC = 0xCECECECE
JKS_MAGIC = 0xFEEDFEED  # JceKeyStore also loads JKS-magic files with the same layout
SECRET_KEY_TAG = 3
MAX_ITERATION_COUNT = 5_000_000  # the limit JceKeyStore's KeyProtector enforces on load
_PRIVATE_KEY_TAG = 1
_TRUSTED_CERT_TAG = 2
_INTEGRITY_SALT = b"Mighty Aphrodite"
_SEAL_ALGORITHM = "PBEWithMD5AndTripleDES"
_MAX_NESTING = 64


class JceksError(ValueError):
    """The keystore cannot be read: wrong password, corrupt or truncated file, unsupported entry."""


# --------------------------------------------------------------------------- bytes


class _Reader:
    """Big-endian reads from a byte string; running off the end raises JceksError."""

    def __init__(self, data: bytes, what: str) -> None:
        self.data = data
        self.pos = 0
        self.what = what

    def take(self, size: int) -> bytes:
        if size < 0 or self.pos + size > len(self.data):
            raise JceksError(f"{self.what} is truncated or corrupt (at byte {self.pos})")
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def unpack(self, fmt: str) -> int:
        (value,) = struct.unpack(fmt, self.take(struct.calcsize(fmt)))
        return int(value)

    def u8(self) -> int:
        return self.unpack(">B")

    def u16(self) -> int:
        return self.unpack(">H")

    def i32(self) -> int:
        return self.unpack(">i")

    def u32(self) -> int:
        return self.unpack(">I")

    def i64(self) -> int:
        return self.unpack(">q")

    def utf(self) -> str:
        """A ``DataOutputStream.writeUTF`` string: 2-byte length, then modified UTF-8."""
        return decode_modified_utf8(self.take(self.u16()), self.what)


def decode_modified_utf8(raw: bytes, what: str = "string") -> str:
    """Java's modified UTF-8: NUL as C0 80, characters above U+FFFF as two 3-byte surrogates."""
    try:
        text = raw.replace(b"\xc0\x80", b"\x00").decode("utf-8", "surrogatepass")
        return text.encode("utf-16-be", "surrogatepass").decode("utf-16-be")
    except UnicodeError:
        raise JceksError(f"{what} holds a malformed string") from None


# --------------------------------------------------------------------------- Java serialization

_STREAM_MAGIC = 0xACED
_STREAM_VERSION = 5
_STREAM_HEADER = struct.pack(">HH", _STREAM_MAGIC, _STREAM_VERSION)
_BASE_HANDLE = 0x7E0000

TC_NULL = 0x70
TC_REFERENCE = 0x71
TC_CLASSDESC = 0x72
TC_OBJECT = 0x73
TC_STRING = 0x74
TC_ARRAY = 0x75
TC_CLASS = 0x76
TC_BLOCKDATA = 0x77
TC_ENDBLOCKDATA = 0x78
TC_RESET = 0x79
TC_BLOCKDATALONG = 0x7A
TC_LONGSTRING = 0x7C
TC_ENUM = 0x7E

SC_WRITE_METHOD = 0x01
SC_SERIALIZABLE = 0x02
SC_EXTERNALIZABLE = 0x04

_PRIMITIVE_FORMATS = {"B": ">b", "C": ">H", "D": ">d", "F": ">f", "I": ">i", "J": ">q", "S": ">h", "Z": ">?"}


@dataclass(frozen=True)
class JavaField:
    """One serializable field of a class: its type code (``B``, ``I``, ``L``, ``[``...) and name."""

    typecode: str
    name: str


@dataclass(frozen=True)
class JavaClass:
    """A class descriptor from the stream, with its serializable superclass chain."""

    name: str
    flags: int
    fields: tuple[JavaField, ...]
    superclass: JavaClass | None

    def lineage(self) -> list[JavaClass]:
        """This class and its serializable ancestors, the topmost ancestor first (stream order)."""
        chain: list[JavaClass] = []
        current: JavaClass | None = self
        while current is not None:
            chain.append(current)
            current = current.superclass
        return chain[::-1]

    def is_a(self, class_name: str) -> bool:
        return any(cls.name == class_name for cls in self.lineage())


@dataclass
class JavaObject:
    """A deserialized object: its class and its field values (all levels of the hierarchy)."""

    java_class: JavaClass
    fields: dict[str, JavaValue] = field(default_factory=dict)


@dataclass(frozen=True)
class JavaEnum:
    """An enum constant: its class and constant name."""

    java_class: JavaClass
    constant: str


JavaValue: TypeAlias = (
    "bool | int | float | str | bytes | JavaObject | JavaEnum | JavaClass | list[JavaValue] | None"
)


class _JavaStreamParser:
    """Reads one object from a Java serialization stream (``ObjectOutputStream``).

    Supports what serialized keys and sealed objects use: objects, class descriptors, strings,
    arrays, enums, back references, nulls and the block data of ``writeObject`` methods.
    Proxy classes, externalizable objects and exceptions in the stream are refused.
    """

    def __init__(self, reader: _Reader) -> None:
        self.reader = reader
        self.handles: list[JavaValue] = []

    def read_stream(self) -> JavaValue:
        if self.reader.u16() != _STREAM_MAGIC or self.reader.u16() != _STREAM_VERSION:
            raise JceksError(f"{self.reader.what}: not a Java serialization stream")
        return self.read_content(0)

    def _fail(self, problem: str) -> JceksError:
        return JceksError(f"{self.reader.what}: {problem}")

    def _assign(self, value: JavaValue) -> int:
        self.handles.append(value)
        return len(self.handles) - 1

    def read_content(self, depth: int) -> JavaValue:
        if depth > _MAX_NESTING:
            raise self._fail("serialized objects nested too deeply")
        tc = self.reader.u8()
        if tc == TC_RESET:
            self.handles.clear()
            return self.read_content(depth)
        if tc == TC_NULL:
            return None
        if tc == TC_REFERENCE:
            return self._read_reference()
        if tc in (TC_CLASSDESC, TC_CLASS):
            self.reader.pos -= 1
            return self.read_class_desc(depth)
        if tc == TC_OBJECT:
            return self._read_object(depth)
        if tc in (TC_STRING, TC_LONGSTRING):
            return self._read_string(tc)
        if tc == TC_ARRAY:
            return self._read_array(depth)
        if tc == TC_ENUM:
            return self._read_enum(depth)
        raise self._fail(f"unsupported serialization type code 0x{tc:02x}")

    def _read_reference(self) -> JavaValue:
        index = self.reader.i32() - _BASE_HANDLE
        if not 0 <= index < len(self.handles) or self.handles[index] is None:
            raise self._fail("dangling back reference")
        return self.handles[index]

    def _read_string(self, tc: int) -> str:
        size = self.reader.u16() if tc == TC_STRING else self.reader.i64()
        text = decode_modified_utf8(self.reader.take(size), self.reader.what)
        self._assign(text)
        return text

    def read_class_desc(self, depth: int) -> JavaClass | None:
        tc = self.reader.u8()
        if tc == TC_NULL:
            return None
        if tc == TC_REFERENCE:
            found = self._read_reference()
            if not isinstance(found, JavaClass):
                raise self._fail("back reference to a non-class where a class was expected")
            return found
        if tc == TC_CLASS:  # a java.lang.Class object: its descriptor, then its own handle
            desc = self.read_class_desc(depth + 1)
            self._assign(desc)
            return desc
        if tc != TC_CLASSDESC:
            raise self._fail(f"expected a class descriptor, found type code 0x{tc:02x}")
        name = self.reader.utf()
        self.reader.take(8)  # serialVersionUID
        handle = self._assign(None)  # reserved now: the field type strings come after it
        flags = self.reader.u8()
        fields = tuple(self._read_field_desc(depth) for _field in range(self.reader.u16()))
        self._skip_annotations(depth)
        superclass = self.read_class_desc(depth + 1)
        desc = JavaClass(name, flags, fields, superclass)
        self.handles[handle] = desc
        return desc

    def _read_field_desc(self, depth: int) -> JavaField:
        typecode = chr(self.reader.u8())
        name = self.reader.utf()
        if typecode in "L[":
            if not isinstance(self.read_content(depth + 1), str):  # the field's class name
                raise self._fail(f"field {name!r} has no type name")
        elif typecode not in _PRIMITIVE_FORMATS:
            raise self._fail(f"field {name!r} has an unknown type code")
        return JavaField(typecode, name)

    def _skip_annotations(self, depth: int) -> None:
        """Skip the data a class's ``writeObject``/``annotateClass`` wrote, up to TC_ENDBLOCKDATA."""
        while True:
            tc = self.reader.u8()
            if tc == TC_ENDBLOCKDATA:
                return
            if tc == TC_BLOCKDATA:
                self.reader.take(self.reader.u8())
            elif tc == TC_BLOCKDATALONG:
                self.reader.take(self.reader.i32())
            else:
                self.reader.pos -= 1
                self.read_content(depth + 1)

    def _require_class(self, depth: int) -> JavaClass:
        desc = self.read_class_desc(depth + 1)
        if desc is None:
            raise self._fail("object without a class")
        return desc

    def _read_object(self, depth: int) -> JavaObject:
        desc = self._require_class(depth)
        obj = JavaObject(desc)
        self._assign(obj)
        for cls in desc.lineage():
            if cls.flags & SC_EXTERNALIZABLE:
                raise self._fail(f"externalizable class {cls.name} is not supported")
            if cls.flags & SC_SERIALIZABLE:
                for fld in cls.fields:
                    obj.fields[fld.name] = self._read_field_value(fld.typecode, depth)
            if cls.flags & SC_WRITE_METHOD:
                self._skip_annotations(depth)
        return obj

    def _read_field_value(self, typecode: str, depth: int) -> JavaValue:
        if typecode in "L[":
            return self.read_content(depth + 1)
        fmt = _PRIMITIVE_FORMATS[typecode]
        (value,) = struct.unpack(fmt, self.reader.take(struct.calcsize(fmt)))
        return chr(value) if typecode == "C" else value

    def _read_array(self, depth: int) -> JavaValue:
        desc = self._require_class(depth)
        if not desc.name.startswith("[") or len(desc.name) < 2:
            raise self._fail(f"array of non-array class {desc.name}")
        handle = self._assign(None)
        size = self.reader.i32()
        if size < 0:
            raise self._fail("negative array size")
        component = desc.name[1]
        value: JavaValue
        if component == "B":
            value = self.reader.take(size)
        else:
            items: list[JavaValue] = []
            self.handles[handle] = items  # elements may refer back to the array
            for _item in range(size):
                items.append(self._read_field_value(component, depth))
            value = items
        self.handles[handle] = value
        return value

    def _read_enum(self, depth: int) -> JavaEnum:
        desc = self._require_class(depth)
        handle = self._assign(None)
        constant = self.read_content(depth + 1)
        if not isinstance(constant, str):
            raise self._fail(f"enum {desc.name} without a constant name")
        value = JavaEnum(desc, constant)
        self.handles[handle] = value
        return value


def read_java_object(reader: _Reader) -> JavaValue:
    """Read one serialized object (stream header included) at the reader's position."""
    return _JavaStreamParser(reader).read_stream()


# --------------------------------------------------------------------------- DES / 3DES (FIPS 46-3)

# Bit tables number bits from 1 = most significant, as FIPS 46-3 does.
_IP = (
    58, 50, 42, 34, 26, 18, 10, 2, 60, 52, 44, 36, 28, 20, 12, 4,
    62, 54, 46, 38, 30, 22, 14, 6, 64, 56, 48, 40, 32, 24, 16, 8,
    57, 49, 41, 33, 25, 17, 9, 1, 59, 51, 43, 35, 27, 19, 11, 3,
    61, 53, 45, 37, 29, 21, 13, 5, 63, 55, 47, 39, 31, 23, 15, 7,
)  # fmt: skip
_FP = (
    40, 8, 48, 16, 56, 24, 64, 32, 39, 7, 47, 15, 55, 23, 63, 31,
    38, 6, 46, 14, 54, 22, 62, 30, 37, 5, 45, 13, 53, 21, 61, 29,
    36, 4, 44, 12, 52, 20, 60, 28, 35, 3, 43, 11, 51, 19, 59, 27,
    34, 2, 42, 10, 50, 18, 58, 26, 33, 1, 41, 9, 49, 17, 57, 25,
)  # fmt: skip
_E = (
    32, 1, 2, 3, 4, 5, 4, 5, 6, 7, 8, 9, 8, 9, 10, 11, 12, 13, 12, 13, 14, 15, 16, 17,
    16, 17, 18, 19, 20, 21, 20, 21, 22, 23, 24, 25, 24, 25, 26, 27, 28, 29, 28, 29, 30, 31, 32, 1,
)  # fmt: skip
_P = (
    16, 7, 20, 21, 29, 12, 28, 17, 1, 15, 23, 26, 5, 18, 31, 10,
    2, 8, 24, 14, 32, 27, 3, 9, 19, 13, 30, 6, 22, 11, 4, 25,
)  # fmt: skip
_PC1 = (
    57, 49, 41, 33, 25, 17, 9, 1, 58, 50, 42, 34, 26, 18,
    10, 2, 59, 51, 43, 35, 27, 19, 11, 3, 60, 52, 44, 36,
    63, 55, 47, 39, 31, 23, 15, 7, 62, 54, 46, 38, 30, 22,
    14, 6, 61, 53, 45, 37, 29, 21, 13, 5, 28, 20, 12, 4,
)  # fmt: skip
_PC2 = (
    14, 17, 11, 24, 1, 5, 3, 28, 15, 6, 21, 10, 23, 19, 12, 4, 26, 8, 16, 7, 27, 20, 13, 2,
    41, 52, 31, 37, 47, 55, 30, 40, 51, 45, 33, 48, 44, 49, 39, 56, 34, 53, 46, 42, 50, 36, 29, 32,
)  # fmt: skip
_SHIFTS = (1, 1, 2, 2, 2, 2, 2, 2, 1, 2, 2, 2, 2, 2, 2, 1)
_SBOXES = (
    (14, 4, 13, 1, 2, 15, 11, 8, 3, 10, 6, 12, 5, 9, 0, 7,
     0, 15, 7, 4, 14, 2, 13, 1, 10, 6, 12, 11, 9, 5, 3, 8,
     4, 1, 14, 8, 13, 6, 2, 11, 15, 12, 9, 7, 3, 10, 5, 0,
     15, 12, 8, 2, 4, 9, 1, 7, 5, 11, 3, 14, 10, 0, 6, 13),
    (15, 1, 8, 14, 6, 11, 3, 4, 9, 7, 2, 13, 12, 0, 5, 10,
     3, 13, 4, 7, 15, 2, 8, 14, 12, 0, 1, 10, 6, 9, 11, 5,
     0, 14, 7, 11, 10, 4, 13, 1, 5, 8, 12, 6, 9, 3, 2, 15,
     13, 8, 10, 1, 3, 15, 4, 2, 11, 6, 7, 12, 0, 5, 14, 9),
    (10, 0, 9, 14, 6, 3, 15, 5, 1, 13, 12, 7, 11, 4, 2, 8,
     13, 7, 0, 9, 3, 4, 6, 10, 2, 8, 5, 14, 12, 11, 15, 1,
     13, 6, 4, 9, 8, 15, 3, 0, 11, 1, 2, 12, 5, 10, 14, 7,
     1, 10, 13, 0, 6, 9, 8, 7, 4, 15, 14, 3, 11, 5, 2, 12),
    (7, 13, 14, 3, 0, 6, 9, 10, 1, 2, 8, 5, 11, 12, 4, 15,
     13, 8, 11, 5, 6, 15, 0, 3, 4, 7, 2, 12, 1, 10, 14, 9,
     10, 6, 9, 0, 12, 11, 7, 13, 15, 1, 3, 14, 5, 2, 8, 4,
     3, 15, 0, 6, 10, 1, 13, 8, 9, 4, 5, 11, 12, 7, 2, 14),
    (2, 12, 4, 1, 7, 10, 11, 6, 8, 5, 3, 15, 13, 0, 14, 9,
     14, 11, 2, 12, 4, 7, 13, 1, 5, 0, 15, 10, 3, 9, 8, 6,
     4, 2, 1, 11, 10, 13, 7, 8, 15, 9, 12, 5, 6, 3, 0, 14,
     11, 8, 12, 7, 1, 14, 2, 13, 6, 15, 0, 9, 10, 4, 5, 3),
    (12, 1, 10, 15, 9, 2, 6, 8, 0, 13, 3, 4, 14, 7, 5, 11,
     10, 15, 4, 2, 7, 12, 9, 5, 6, 1, 13, 14, 0, 11, 3, 8,
     9, 14, 15, 5, 2, 8, 12, 3, 7, 0, 4, 10, 1, 13, 11, 6,
     4, 3, 2, 12, 9, 5, 15, 10, 11, 14, 1, 7, 6, 0, 8, 13),
    (4, 11, 2, 14, 15, 0, 8, 13, 3, 12, 9, 7, 5, 10, 6, 1,
     13, 0, 11, 7, 4, 9, 1, 10, 14, 3, 5, 12, 2, 15, 8, 6,
     1, 4, 11, 13, 12, 3, 7, 14, 10, 15, 6, 8, 0, 5, 9, 2,
     6, 11, 13, 8, 1, 4, 10, 7, 9, 5, 0, 15, 14, 2, 3, 12),
    (13, 2, 8, 4, 6, 15, 11, 1, 10, 9, 3, 14, 5, 0, 12, 7,
     1, 15, 13, 8, 10, 3, 7, 4, 12, 5, 6, 11, 0, 14, 9, 2,
     7, 11, 4, 1, 9, 12, 14, 2, 0, 6, 10, 13, 15, 3, 5, 8,
     2, 1, 14, 7, 4, 10, 8, 13, 15, 12, 9, 0, 3, 5, 6, 11),
)  # fmt: skip


def permute(value: int, table: Sequence[int], width: int) -> int:
    """Output bit i (1 = most significant) is input bit ``table[i-1]`` of a ``width``-bit value."""
    out = 0
    for position in table:
        out = (out << 1) | ((value >> (width - position)) & 1)
    return out


def _byte_tables(table: Sequence[int], width: int) -> list[list[int]]:
    """Precompute ``permute`` one input byte at a time: OR the 8-bit lookups to permute a value."""
    return [
        [permute(byte << (width - 8 * (index + 1)), table, width) for byte in range(256)]
        for index in range(width // 8)
    ]


def _permute_by_bytes(value: int, tables: list[list[int]], width: int) -> int:
    out = 0
    for index, lookup in enumerate(tables):
        out |= lookup[(value >> (width - 8 * (index + 1))) & 0xFF]
    return out


def _sbox_lookup(box: int, six_bits: int) -> int:
    """S-box ``box``: the outer two bits pick the row, the middle four the column."""
    row = ((six_bits >> 4) & 0b10) | (six_bits & 1)
    column = (six_bits >> 1) & 0xF
    return _SBOXES[box][16 * row + column]


_IP_BYTES = _byte_tables(_IP, 64)
_FP_BYTES = _byte_tables(_FP, 64)
_E_BYTES = _byte_tables(_E, 32)
# S-box then P in one lookup: the 4 output bits of S-box i sit at bits 4i+1..4i+4 before P.
_SP = [[permute(_sbox_lookup(box, six) << (28 - 4 * box), _P, 32) for six in range(64)] for box in range(8)]


def des_subkeys(key: bytes) -> list[int]:
    """The sixteen 48-bit round keys of an 8-byte DES key (parity bits ignored)."""
    if len(key) != 8:
        raise ValueError("a DES key is 8 bytes")
    cd = permute(int.from_bytes(key, "big"), _PC1, 64)
    c, d = cd >> 28, cd & 0xFFFFFFF
    subkeys = []
    for shift in _SHIFTS:
        c = ((c << shift) | (c >> (28 - shift))) & 0xFFFFFFF
        d = ((d << shift) | (d >> (28 - shift))) & 0xFFFFFFF
        subkeys.append(permute((c << 28) | d, _PC2, 56))
    return subkeys


def _feistel(right: int, subkey: int) -> int:
    mixed = _permute_by_bytes(right, _E_BYTES, 32) ^ subkey
    out = 0
    for box in range(8):
        out |= _SP[box][(mixed >> (42 - 6 * box)) & 0x3F]
    return out


def des_crypt_block(block: int, subkeys: Sequence[int]) -> int:
    """One 64-bit DES block; pass the subkeys reversed to decrypt."""
    state = _permute_by_bytes(block, _IP_BYTES, 64)
    left, right = state >> 32, state & 0xFFFFFFFF
    for subkey in subkeys:
        left, right = right, left ^ _feistel(right, subkey)
    return _permute_by_bytes((right << 32) | left, _FP_BYTES, 64)


def des_encrypt_block(key: bytes, block: bytes) -> bytes:
    """DES-encrypt one 8-byte block (ECB), for known-answer tests."""
    return des_crypt_block(int.from_bytes(block, "big"), des_subkeys(key)).to_bytes(8, "big")


def des_decrypt_block(key: bytes, block: bytes) -> bytes:
    """DES-decrypt one 8-byte block (ECB)."""
    return des_crypt_block(int.from_bytes(block, "big"), des_subkeys(key)[::-1]).to_bytes(8, "big")


def des_ede3_cbc_decrypt(key: bytes, iv: bytes, ciphertext: bytes) -> bytes:
    """3DES-EDE (24-byte key K1|K2|K3) in CBC mode, no unpadding: P = D_K1(E_K2(D_K3(C))) ^ prev."""
    if len(key) != 24 or len(iv) != 8:
        raise ValueError("3DES needs a 24-byte key and an 8-byte IV")
    if len(ciphertext) % 8:
        raise ValueError("3DES-CBC ciphertext is not a whole number of blocks")
    k1, k2, k3 = (des_subkeys(key[i : i + 8]) for i in (0, 8, 16))
    k1_dec, k3_dec = k1[::-1], k3[::-1]
    previous = int.from_bytes(iv, "big")
    plain = bytearray()
    for offset in range(0, len(ciphertext), 8):
        block = int.from_bytes(ciphertext[offset : offset + 8], "big")
        value = des_crypt_block(des_crypt_block(des_crypt_block(block, k3_dec), k2), k1_dec)
        plain += (value ^ previous).to_bytes(8, "big")
        previous = block
    return bytes(plain)


def pkcs5_unpad(padded: bytes) -> bytes:
    """Strip PKCS#5 padding (1 to 8 bytes, each holding the pad length)."""
    if not padded or len(padded) % 8:
        raise ValueError("bad padding")
    size = padded[-1]
    if not 1 <= size <= 8 or padded[-size:] != bytes([size]) * size:
        raise ValueError("bad padding")
    return padded[:-size]


# --------------------------------------------------------------------------- PBEWithMD5AndTripleDES


def pbe_password_bytes(password: str) -> bytes:
    """The password as Sun's ``PBEKey`` takes it: printable ASCII only, one byte per character."""
    if any(not " " <= ch <= "~" for ch in password):
        raise JceksError("the keystore password must be printable ASCII to unseal JCEKS secret keys")
    return password.encode("ascii")


class _Digest(Protocol):
    def digest(self) -> bytes: ...


def _md5_constructor() -> Callable[[bytes], _Digest]:
    """CPython's built-in MD5 when present: for tiny inputs it is twice as fast as OpenSSL's."""
    try:
        from _md5 import md5
    except ImportError:  # an interpreter built without the built-in hashes
        return functools.partial(hashlib.md5, usedforsecurity=False)
    return cast("Callable[[bytes], _Digest]", md5)


_new_md5 = _md5_constructor()


def _md5_chain(first: bytes, password: bytes, iterations: int) -> bytes:
    digest = first
    for _round in range(iterations):
        digest = _new_md5(digest + password).digest()
    return digest


def derive_triple_des_key_iv(password: bytes, salt: bytes, iterations: int) -> tuple[bytes, bytes]:
    """Sun's PBEWithMD5AndTripleDES derivation: a 24-byte 3DES key and an 8-byte IV.

    Each 4-byte salt half, followed by the password, is hashed with MD5; every further round hashes
    the previous digest followed by the password. The two 16-byte results, concatenated, are the
    key (first 24 bytes) and the IV (last 8). Identical halves get the first half reversed.
    """
    if len(salt) != 8:
        raise JceksError("PBE salt must be 8 bytes")
    if not 1 <= iterations <= MAX_ITERATION_COUNT:
        raise JceksError(f"PBE iteration count {iterations} is out of range")
    first, second = salt[:4], salt[4:]
    if first == second:
        first = first[::-1]
    derived = _md5_chain(first, password, iterations) + _md5_chain(second, password, iterations)
    return derived[:24], derived[24:]


def _der_item(reader: _Reader, expected_tag: int) -> bytes:
    if reader.u8() != expected_tag:
        raise JceksError("malformed PBE parameters")
    size = reader.u8()
    if size & 0x80:  # long form: the low bits say how many length bytes follow
        size = int.from_bytes(reader.take(size & 0x7F), "big")
    return reader.take(size)


def parse_pbe_parameters(der: bytes) -> tuple[bytes, int]:
    """DER ``SEQUENCE { OCTET STRING salt, INTEGER iterationCount }`` → (salt, count)."""
    body = _Reader(_der_item(_Reader(der, "PBE parameters"), 0x30), "PBE parameters")
    salt = _der_item(body, 0x04)
    count = int.from_bytes(_der_item(body, 0x02), "big", signed=True)
    return salt, count


# --------------------------------------------------------------------------- the keystore


@dataclass(frozen=True)
class _SealedEntry:
    alias: str
    sealed: JavaValue


def _skip_certificate(reader: _Reader, version: int) -> None:
    if version == 2:
        reader.utf()  # certificate type, e.g. "X.509"
    reader.take(reader.i32())


def _parse_entries(reader: _Reader) -> list[_SealedEntry]:
    """Walk the store up to the integrity digest; keep the (still sealed) secret-key entries."""
    magic, version = reader.u32(), reader.u32()
    if magic not in (JCEKS_MAGIC, JKS_MAGIC) or version not in (1, 2):
        raise JceksError("not a JCEKS keystore (bad magic number or version)")
    count = reader.i32()
    if count < 0:
        raise JceksError("keystore is corrupt (negative entry count)")
    sealed_entries = []
    for _entry in range(count):
        tag = reader.i32()
        alias = reader.utf()
        reader.i64()  # creation date
        if tag == SECRET_KEY_TAG:
            sealed_entries.append(_SealedEntry(alias, read_java_object(reader)))
        elif tag == _PRIVATE_KEY_TAG:  # not a secret: skip the protected key and its chain
            reader.take(reader.i32())
            for _cert in range(reader.i32()):
                _skip_certificate(reader, version)
        elif tag == _TRUSTED_CERT_TAG:
            _skip_certificate(reader, version)
        else:
            raise JceksError(f"unsupported keystore entry type {tag} (alias {alias!r})")
    return sealed_entries


def _verify_integrity(data: bytes, body_end: int, store_password: str) -> None:
    digest = hashlib.sha1(usedforsecurity=False)
    digest.update(store_password.encode("utf-16-be"))  # Java chars, high byte first
    digest.update(_INTEGRITY_SALT)
    digest.update(data[:body_end])
    stored = data[body_end:]
    if len(stored) < digest.digest_size:
        raise JceksError("keystore is truncated (integrity digest missing)")
    if len(stored) > digest.digest_size:
        raise JceksError("keystore is corrupt (unexpected bytes after the integrity digest)")
    if not hmac.compare_digest(digest.digest(), stored):
        raise JceksError("keystore integrity check failed: wrong password, or the file was altered")


def _byte_field(obj: JavaObject, name: str, alias: str) -> bytes:
    value = obj.fields.get(name)
    if not isinstance(value, bytes):
        raise JceksError(f"secret key entry {alias!r} lacks its {name!r} bytes")
    return value


def _key_material(alias: str, key: JavaValue) -> bytes:
    """The raw bytes of a deserialized ``SecretKeySpec``-like key, or of a ``KeyRep`` of one."""
    if not isinstance(key, JavaObject):
        raise JceksError(f"secret key entry {alias!r} does not hold a key object")
    if key.java_class.is_a("java.security.KeyRep"):
        kind, fmt = key.fields.get("type"), key.fields.get("format")
        if not isinstance(kind, JavaEnum) or kind.constant != "SECRET" or fmt != "RAW":
            raise JceksError(f"secret key entry {alias!r} holds an unsupported KeyRep (not a raw secret)")
        return _byte_field(key, "encoded", alias)
    if "key" in key.fields:  # javax.crypto.spec.SecretKeySpec and the provider key classes
        return _byte_field(key, "key", alias)
    raise JceksError(f"secret key entry {alias!r} holds an unsupported key class {key.java_class.name}")


def _unseal(entry: _SealedEntry, password: bytes) -> bytes:
    alias, sealed = entry.alias, entry.sealed
    if not isinstance(sealed, JavaObject) or not sealed.java_class.is_a("javax.crypto.SealedObject"):
        raise JceksError(f"secret key entry {alias!r} is not a sealed object")
    if sealed.fields.get("sealAlg") != _SEAL_ALGORITHM:
        raise JceksError(f"secret key entry {alias!r} is sealed with an unsupported algorithm")
    salt, iterations = parse_pbe_parameters(_byte_field(sealed, "encodedParams", alias))
    ciphertext = _byte_field(sealed, "encryptedContent", alias)
    key, iv = derive_triple_des_key_iv(password, salt, iterations)
    try:
        plaintext = pkcs5_unpad(des_ede3_cbc_decrypt(key, iv, ciphertext))
    except ValueError:
        plaintext = b""
    # A wrong key still passes the padding check about once in 256 tries; the store's digest already
    # proved the file intact, so plaintext that is not a serialization stream means the same thing.
    if not plaintext.startswith(_STREAM_HEADER):
        raise JceksError(
            f"cannot unseal secret key entry {alias!r}: its key password differs from the store password"
        )
    try:
        key_object = read_java_object(_Reader(plaintext, f"secret key entry {alias!r}"))
    except JceksError as err:  # the message names the entry and the problem, never the bytes
        raise JceksError(f"cannot unseal secret key entry {alias!r}: {err}") from None
    return _key_material(alias, key_object)


def read_secret_entries(data: bytes, store_password: str) -> dict[str, bytes]:
    """Alias → secret bytes for every secret-key entry of a JCEKS keystore.

    The store's keyed SHA-1 digest is checked first, so a wrong password or an altered file fails
    before anything is decrypted; every entry is unsealed with the store password (Hadoop's and
    keytool's default). Private-key and certificate entries are skipped. Aliases come back as
    stored, which JCEKS lowercases. Raises JceksError; its messages never contain secret bytes.
    """
    reader = _Reader(data, "keystore")
    sealed_entries = _parse_entries(reader)
    _verify_integrity(data, reader.pos, store_password)
    if not sealed_entries:
        return {}
    password = pbe_password_bytes(store_password)
    return {entry.alias: _unseal(entry, password) for entry in sealed_entries}
