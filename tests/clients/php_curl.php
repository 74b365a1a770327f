<?php
// php_curl.php URL N [CAFILE] - PHP's curl extension (Debian php-curl), a
// new handle per request with "Connection: close", as scripts use it.
// Prints per request the status and the body.  CAFILE: trust it (HTTPS).
$url = $argv[1];
$n = (int)$argv[2];
$ca = $argv[3] ?? null;
for ($i = 1; $i <= $n; $i++) {
	$ch = curl_init($url);
	curl_setopt($ch, CURLOPT_RETURNTRANSFER, true);
	curl_setopt($ch, CURLOPT_HTTPHEADER, ["Connection: close"]);
	if ($ca !== null)
		curl_setopt($ch, CURLOPT_CAINFO, $ca);
	$body = curl_exec($ch);
	echo "== ", $i, " ", curl_getinfo($ch, CURLINFO_HTTP_CODE), "\n", $body;
	curl_close($ch);
}
