#!/bb/sh
# Guest side of lab.MonitorRequestPrintedInPieces: a cable request printed in two pieces, the host
# polling the console between them, must still pull the cable once its line is whole; then the
# cable is plugged back. The carrier is read from sysfs, 10 s allowed for each.
carrier=/sys/class/net/$RECCL_LAB_NIC/carrier
wait_carrier() {  # VALUE WHAT
  i=0
  while [ "$(cat "$carrier")" != "$1" ]; do
    [ $i -lt 100 ] || { echo "$RECCL_LAB_NIC: $2 within 10 s (carrier reads $(cat "$carrier"))"; exit 1; }
    sleep 0.1
    i=$((i + 1))
  done
}
printf '\n@@lab-monitor set_l'
sleep 0.5
printf 'ink %s off\n' "$RECCL_LAB_NIC_ID"
wait_carrier 0 "cable not pulled"
echo "$RECCL_LAB_NIC: pulled by a request printed in two pieces"
printf '\n@@lab-monitor set_link %s on\n' "$RECCL_LAB_NIC_ID"
wait_carrier 1 "cable not plugged back"
echo "$RECCL_LAB_NIC: plugged back"
