"""What tarn-launcher.pyz ships (it runs in a stock Triton image, before anything is installed): the
launcher, the option declaration, WebHDFS, HDFS's checksum, JCEKS and Hadoop's *-site.xml; the
standard library and the few pure-Python wheels tests/unit/test_layout.py allows, which enforces
the rule. The rest of TARN imports these too."""
