"""Pieces of bank files the format tests build their inputs from."""

# The header block an OFX 1.x (SGML) file opens with, up to the blank line before <OFX>.
OFX1_HEADER = """OFXHEADER:100
DATA:OFXSGML
VERSION:102
SECURITY:NONE
ENCODING:USASCII
CHARSET:1252
COMPRESSION:NONE
OLDFILEUID:NONE
NEWFILEUID:NONE

"""
